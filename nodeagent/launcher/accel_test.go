package launcher

import (
	"context"
	"strings"
	"testing"

	"github.com/vmkit/vmkit/domainxml"
	hvfake "github.com/vmkit/vmkit/nodeagent/hypervisor/fake"
)

// TestChooseAcceleration: KVM wherever the hypervisor offers it, TCG only
// where it does not and emulation is allowed, an error naming the setting
// otherwise; the question names the guest's architecture.
func TestChooseAcceleration(t *testing.T) {
	for _, tc := range []struct {
		name           string
		arch           string
		kvm, allowed   bool
		force          bool
		wantEmulation  bool
		wantErr        string
		wantCapsForArc string
	}{
		{name: "kvm", kvm: true, wantCapsForArc: "x86_64"},
		{name: "kvm even when emulation is allowed", kvm: true, allowed: true, wantCapsForArc: "x86_64"},
		{name: "no kvm, emulation allowed", allowed: true, wantEmulation: true, wantCapsForArc: "x86_64"},
		{name: "arm64 guest", arch: "arm64", allowed: true, wantEmulation: true, wantCapsForArc: "aarch64"},
		{name: "no kvm, emulation off", wantErr: "useEmulation", wantCapsForArc: "x86_64"},
		{name: "unknown architecture", arch: "riscv64", allowed: true, wantErr: "spec.architecture"},
		{name: "forced emulation does not ask", kvm: true, force: true, wantEmulation: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hvfake.New()
			h.SetKVM(tc.kvm)
			l := &Launcher{cfg: Config{Name: "vm1", Namespace: "ns", Emulation: tc.allowed, ForceEmulation: tc.force}, h: h}
			vmi := testVMI()
			vmi.Spec.Architecture = tc.arch
			opts := domainxml.Options{Emulation: !tc.wantEmulation} // must be overwritten
			err := l.chooseAcceleration(context.Background(), vmi, &opts)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case opts.Emulation != tc.wantEmulation:
				t.Errorf("Emulation = %v, want %v", opts.Emulation, tc.wantEmulation)
			}
			if tc.force && len(h.Calls()) != 0 {
				t.Errorf("forced emulation asked the hypervisor: %v", h.Calls())
			}
			if tc.wantCapsForArc != "" {
				if calls := h.Calls(); len(calls) != 1 || calls[0] != "KVMSupported "+tc.wantCapsForArc {
					t.Errorf("hypervisor calls %v, want one KVMSupported %s", calls, tc.wantCapsForArc)
				}
			}
		})
	}
}
