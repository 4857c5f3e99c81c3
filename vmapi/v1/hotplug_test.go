package v1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestSetHotplugDefaults(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	stage, live := v1.VMRolloutStrategyStage, v1.VMRolloutStrategyLiveUpdate
	for _, tc := range []struct {
		name           string
		spec           v1.VirtualMachineInstanceSpec
		cfg            *v1.KubeVirtConfiguration
		wantMaxSockets uint32
		wantMaxGuest   string
	}{{
		name:           "KubeVirt's defaults: 4 × sockets and guest memory",
		spec:           v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Sockets: 2, Cores: 2}, Memory: &v1.Memory{Guest: q("1Gi")}}},
		wantMaxSockets: 8, wantMaxGuest: "4Gi",
	}, {
		name: "the cluster's ratio and bounds",
		spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Sockets: 2}, Memory: &v1.Memory{Guest: q("2Gi")}}},
		cfg: &v1.KubeVirtConfiguration{VMRolloutStrategy: &live, LiveUpdateConfiguration: &v1.LiveUpdateConfiguration{
			MaxHotplugRatio: 2, MaxGuest: q("8Gi")}},
		wantMaxSockets: 4, wantMaxGuest: "8Gi",
	}, {
		name: "the Stage strategy: none",
		spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Sockets: 2}, Memory: &v1.Memory{Guest: q("1Gi")}}},
		cfg:  &v1.KubeVirtConfiguration{VMRolloutStrategy: &stage},
	}, {
		name:           "less than 1Gi or unaligned guest memory: no memory headroom",
		spec:           v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Sockets: 1}, Memory: &v1.Memory{Guest: q("512Mi")}}},
		wantMaxSockets: 4,
	}, {
		name: "unaligned guest memory",
		spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: q("1025Mi")}}},
	}, {
		name: "dedicated CPUs: none",
		spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Sockets: 2, DedicatedCPUPlacement: true}, Memory: &v1.Memory{Guest: q("1Gi")}}},
	}, {
		name: "arm64: none",
		spec: v1.VirtualMachineInstanceSpec{Architecture: "arm64", Domain: v1.DomainSpec{CPU: &v1.CPU{Sockets: 2}, Memory: &v1.Memory{Guest: q("1Gi")}}},
	}, {
		name:           "set values are kept; at most 512 vCPUs",
		spec:           v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Sockets: 64, Cores: 4}, Memory: &v1.Memory{Guest: q("1Gi"), MaxGuest: q("2Gi")}}},
		wantMaxSockets: 128, wantMaxGuest: "2Gi",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec.DeepCopy()
			v1.SetHotplugDefaults(spec, tc.cfg)
			var maxSockets uint32
			if spec.Domain.CPU != nil {
				maxSockets = spec.Domain.CPU.MaxSockets
			}
			var maxGuest string
			if spec.Domain.Memory != nil && spec.Domain.Memory.MaxGuest != nil {
				maxGuest = spec.Domain.Memory.MaxGuest.String()
			}
			if maxSockets != tc.wantMaxSockets || maxGuest != tc.wantMaxGuest {
				t.Errorf("maxSockets %d, maxGuest %q; want %d, %q", maxSockets, maxGuest, tc.wantMaxSockets, tc.wantMaxGuest)
			}
		})
	}
}
