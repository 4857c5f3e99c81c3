package launcher

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	"github.com/vmkit/vmkit/nodeagent/launcher/client"
)

// GET /v1/stats answers the hypervisor's statistics of the started
// domain; before the start it is a 409, as is a hypervisor that finds the
// domain shut off, and other failures are a 500.
func TestStats(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	var le *client.Error
	if _, err := f.c.Stats(ctx); !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("Stats before the domain started: %v, want a 409", err)
	}
	if _, err := f.c.Sync(ctx, testVMI()); err != nil {
		t.Fatal(err)
	}
	cpu, rx := uint64(7e9), uint64(1500)
	want := hypervisor.DomainStats{
		CPU:        hypervisor.CPUStats{TimeNs: &cpu},
		VCPUs:      []hypervisor.VCPUStats{{ID: 0, State: hypervisor.VCPURunning, TimeNs: &cpu}},
		Interfaces: []hypervisor.InterfaceStats{{Name: "tap0", Alias: "default", RxBytes: &rx}},
		Disks:      []hypervisor.DiskStats{{Name: "vda", Alias: "root", ReadBytes: &rx}},
	}
	f.h.SetStats("ns_vm1", want)
	got, err := f.c.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	f.h.FailNext("Stats", errors.New("libvirt: internal error"))
	if _, err := f.c.Stats(ctx); !errors.As(err, &le) || le.Code != 500 {
		t.Errorf("Stats when libvirt fails: %v, want a 500", err)
	}
	f.h.FailNext("Stats", hypervisor.ErrInvalidState)
	if _, err := f.c.Stats(ctx); !errors.As(err, &le) || le.Code != 409 {
		t.Errorf("Stats of a domain libvirt finds inactive: %v, want a 409", err)
	}
}
