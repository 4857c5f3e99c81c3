// Command virt-exportserver is the server of a VirtualMachineExport's
// exporter pod: it reads the pod's environment (exportserver.ConfigFromEnv),
// serves the export (exportserver.Server.Run) and exits 0 at the export's
// deadline or on SIGTERM or SIGINT, 1 on a bad environment or a serving
// error. Its only flags are klog's (-v, …).
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/exportserver"
)

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx)
	stop()
	if err != nil {
		klog.ErrorS(err, "virt-exportserver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context) error {
	cfg, err := exportserver.ConfigFromEnv(os.Environ())
	if err != nil {
		return err
	}
	srv, err := exportserver.New(cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
