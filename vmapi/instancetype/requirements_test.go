package instancetype_test

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vmkit/vmkit/vmapi/instancetype"
	instancetypev1beta1 "github.com/vmkit/vmkit/vmapi/instancetype/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func requires(cpu uint32, mem string) *instancetypev1beta1.VirtualMachinePreferenceSpec {
	p := &instancetypev1beta1.VirtualMachinePreferenceSpec{Requirements: &instancetypev1beta1.PreferenceRequirements{}}
	if cpu > 0 {
		p.Requirements.CPU = &instancetypev1beta1.CPUPreferenceRequirement{Guest: cpu}
	}
	if mem != "" {
		p.Requirements.Memory = &instancetypev1beta1.MemoryPreferenceRequirement{Guest: resource.MustParse(mem)}
	}
	return p
}

func TestCheckRequirements(t *testing.T) {
	withTopology := func(p *instancetypev1beta1.VirtualMachinePreferenceSpec, tp instancetypev1beta1.PreferredCPUTopology) *instancetypev1beta1.VirtualMachinePreferenceSpec {
		p.CPU = &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: &tp}
		return p
	}
	cases := []struct {
		name  string
		it    *instancetypev1beta1.VirtualMachineInstancetypeSpec
		pref  *instancetypev1beta1.VirtualMachinePreferenceSpec
		spec  v1.VirtualMachineInstanceSpec
		want  string // "" for met
		field string
	}{
		{name: "no requirements", pref: &instancetypev1beta1.VirtualMachinePreferenceSpec{}},
		{name: "the instance type gives enough", it: small(), pref: requires(2, "1Gi")},
		{name: "too few vCPUs in the instance type", it: small(), pref: requires(4, ""),
			want: "insufficient CPU resources of 2 vCPU provided by instance type, preference requires 4 vCPU", field: "spec.instancetype"},
		{name: "too little memory in the instance type", it: small(), pref: requires(0, "2Gi"),
			want: "insufficient Memory resources of 1Gi provided by instance type, preference requires 2Gi", field: "spec.instancetype"},
		{name: "no CPU in the template", pref: requires(2, ""),
			want: "no CPU resources provided by VirtualMachine, preference requires 2 vCPU", field: "spec.template.spec.domain.cpu"},
		{name: "too few sockets", pref: requires(2, ""), spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Cores: 4, Sockets: 1}}},
			want: "insufficient CPU resources of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as sockets", field: "spec.template.spec.domain.cpu.sockets"},
		{name: "enough cores", pref: withTopology(requires(2, ""), instancetypev1beta1.Cores), spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Cores: 4}}}},
		{name: "any counts them all", pref: withTopology(requires(8, ""), instancetypev1beta1.Any), spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{CPU: &v1.CPU{Cores: 2, Sockets: 2, Threads: 1}}},
			want: "insufficient CPU resources of 4 vCPU provided by VirtualMachine, preference requires 8 vCPU provided as cores, sockets and threads", field: "spec.template.spec.domain.cpu.cores"},
		{name: "guest memory of the template", pref: requires(0, "2Gi"), spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: qty("1Gi")}}},
			want: "insufficient Memory resources of 1Gi provided by VirtualMachine, preference requires 2Gi", field: "spec.template.spec.domain.memory"},
		{name: "architecture", pref: &instancetypev1beta1.VirtualMachinePreferenceSpec{Requirements: &instancetypev1beta1.PreferenceRequirements{Architecture: ptr("arm64")}},
			spec: v1.VirtualMachineInstanceSpec{Architecture: "amd64"},
			want: "preference requires architecture arm64 but amd64 is being requested", field: "spec.template.spec.architecture"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := instancetype.CheckRequirements(tc.it, tc.pref, &tc.spec)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var unmet *instancetype.UnmetError
			if !errors.As(err, &unmet) || err.Error() != tc.want {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if unmet.Fields[0].String() != tc.field {
				t.Errorf("field = %s, want %s", unmet.Fields[0], tc.field)
			}
		})
	}
}

func TestCheckSpreadTopology(t *testing.T) {
	it := small()
	it.CPU.Guest = 6
	if err := instancetype.CheckSpreadTopology(it, topology(instancetypev1beta1.Spread)); err != nil {
		t.Errorf("6 vCPUs at 2 cores per socket: %v", err)
	}
	if err := instancetype.CheckSpreadTopology(it, spread(instancetypev1beta1.SpreadAcrossSocketsCores, 4)); err == nil {
		t.Error("6 vCPUs at 4 cores per socket: want an error")
	}
	if err := instancetype.CheckSpreadTopology(it, spread(instancetypev1beta1.SpreadAcrossSocketsCoresThreads, 2)); err == nil ||
		err.Error() != "6 vCPUs provided by the instance type are not divisible by the number of threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2" {
		t.Errorf("6 vCPUs as sockets of 2 cores of 2 threads: %v", err)
	}
	if err := instancetype.CheckSpreadTopology(it, topology(instancetypev1beta1.Cores)); err != nil {
		t.Errorf("not spread: %v", err)
	}
}
