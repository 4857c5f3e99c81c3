// Command pause is vmkit's stand-in for registry.k8s.io/pause, the
// sandbox container of every pod: it sleeps until SIGINT or SIGTERM and
// reaps the zombies it inherits as a pod's PID 1 (with
// shareProcessNamespace). hack/build-images.sh builds it static into the
// registry.k8s.io/pause:3.10 image.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is the upstream pause version this stands in for.
const version = "3.10"

func main() {
	if len(os.Args) > 1 {
		if os.Args[1] == "-v" {
			fmt.Println("pause " + version + " (vmkit)")
			return
		}
		fmt.Fprintln(os.Stderr, "usage: pause [-v]")
		os.Exit(2)
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
