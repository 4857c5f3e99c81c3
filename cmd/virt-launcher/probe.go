package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// probeFlag runs virt-launcher as the launcher pod's exec probe (KubeVirt's
// virt-probe): 'virt-launcher --probe readiness|liveness --kubevirt-share-dir
// DIR --uid UID --timeout-seconds N' asks the launcher of the VMI, through
// its command socket, to run the VMI's probe through the guest agent (see
// launcher.Launcher.Probe). It exits 0 when the probe passes, 1 when it
// fails, 2 when it cannot ask.
const probeFlag = "--probe"

// probe is virt-launcher --probe; args follow the flag.
func probe(args []string, stdout, stderr io.Writer) int {
	kind := client.ProbeKind(args[0])
	fs := flag.NewFlagSet("virt-launcher --probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	shareDir := fs.String("kubevirt-share-dir", "/var/run/kubevirt", "directory holding the launcher's command socket under sockets/<uid>/")
	uid := fs.String("uid", "", "UID of the VirtualMachineInstance")
	timeout := fs.Int("timeout-seconds", 1, "how long the guest may take to answer")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *uid == "" {
		fmt.Fprintln(stderr, "virt-launcher --probe: --uid is required")
		return 2
	}
	c := client.New(client.SocketPath(*shareDir, *uid))
	defer c.Close()
	res, err := c.Probe(context.Background(), kind, time.Duration(*timeout)*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "virt-launcher --probe %s: %v\n", kind, err)
		return 2
	}
	if res.Output != "" {
		fmt.Fprint(stdout, res.Output)
	}
	if res.Message != "" {
		fmt.Fprintln(stderr, res.Message)
	}
	if !res.Success {
		return 1
	}
	return 0
}
