// Command vmctl controls vmkit's (and KubeVirt's) virtual machines: KubeVirt's
// virtctl commands on kubectl's flags. Installed as kubectl-vmctl it is a
// kubectl plugin. See package github.com/vmkit/vmkit/vmctl.
package main

import (
	"os"

	"github.com/vmkit/vmkit/vmctl"
)

func main() {
	if err := vmctl.NewCommand(vmctl.Options{}).Execute(); err != nil {
		os.Exit(1)
	}
}
