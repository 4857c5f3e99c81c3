package podtemplate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vmkit/vmkit/domainxml"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestMemoryOverhead(t *testing.T) {
	const gi = 1 << 30
	base := overheadInput{guestMemory: 1 * gi, vcpus: 1, disks: 1, interfaces: 1, graphics: true}
	// 220Mi processes + 2Mi page tables + 8Mi vCPU + 8Mi I/O thread +
	// 4Mi disk + 2Mi NIC + 32Mi video.
	const baseMi = 220 + 2 + 8 + 8 + 4 + 2 + 32
	tests := []struct {
		name   string
		edit   func(*overheadInput)
		policy OverheadPolicy
		wantMi int64
	}{
		{"one of everything", nil, OverheadPolicy{Ratio: 1}, baseMi},
		{"page tables grow with guest memory", func(in *overheadInput) { in.guestMemory = 64 * gi }, OverheadPolicy{Ratio: 1}, baseMi - 2 + 128},
		{"vCPUs", func(in *overheadInput) { in.vcpus = 16 }, OverheadPolicy{Ratio: 1}, baseMi + 15*8},
		{"disks", func(in *overheadInput) { in.disks = 11 }, OverheadPolicy{Ratio: 1}, baseMi + 10*4},
		{"interfaces", func(in *overheadInput) { in.interfaces = 4 }, OverheadPolicy{Ratio: 1}, baseMi + 3*2},
		{"no graphics", func(in *overheadInput) { in.graphics = false }, OverheadPolicy{Ratio: 1}, baseMi - 32},
		{"arm64 firmware", func(in *overheadInput) { in.arm64 = true }, OverheadPolicy{Ratio: 1}, baseMi + 128},
		{"a TPM: swtpm", func(in *overheadInput) { in.tpm = true }, OverheadPolicy{Ratio: 1}, baseMi + 53},
		{"dedicated CPUs", func(in *overheadInput) { in.dedicated = true }, OverheadPolicy{Ratio: 1}, baseMi + 100},
		{"emulation: QEMU's translation cache", func(in *overheadInput) { in.tcg = true }, OverheadPolicy{Ratio: 1}, baseMi + 128},
		{"ratio", nil, OverheadPolicy{Ratio: 1.5}, 414}, // ceil(276 × 1.5)
		{"ratio spares the dedicated reserve", func(in *overheadInput) { in.dedicated = true }, OverheadPolicy{Ratio: 2}, 2*baseMi + 100},
		{"extra", nil, OverheadPolicy{Ratio: 1, Extra: resource.MustParse("10Mi")}, baseMi + 10},
		{"rounded up to MiB", func(in *overheadInput) { in.guestMemory = 64_000_000 }, OverheadPolicy{Ratio: 1}, baseMi - 2 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			if tt.edit != nil {
				tt.edit(&in)
			}
			if got := memoryOverhead(in, tt.policy); got != tt.wantMi*mi {
				t.Errorf("overhead %d bytes (%.2fMi), want %dMi", got, float64(got)/mi, tt.wantMi)
			}
		})
	}
}

// TestTCGCacheOverhead: the overhead counts the translation cache domainxml
// bounds QEMU's to.
func TestTCGCacheOverhead(t *testing.T) {
	if tcgCacheOverhead != domainxml.TCGTranslationCacheMiB*mi {
		t.Errorf("tcgCacheOverhead is %d MiB, domainxml.TCGTranslationCacheMiB %d", tcgCacheOverhead/mi, domainxml.TCGTranslationCacheMiB)
	}
}

// TestMemoryOverheadGrows: more vCPUs, disks, interfaces or memory never
// lower the overhead, and each raises it.
func TestMemoryOverheadGrows(t *testing.T) {
	p := OverheadPolicy{Ratio: 1}
	base := overheadInput{guestMemory: 1 << 30, vcpus: 2, disks: 2, interfaces: 2}
	for name, grow := range map[string]func(*overheadInput){
		"vcpus":      func(in *overheadInput) { in.vcpus++ },
		"disks":      func(in *overheadInput) { in.disks++ },
		"interfaces": func(in *overheadInput) { in.interfaces++ },
		"memory":     func(in *overheadInput) { in.guestMemory += 1 << 30 },
	} {
		in := base
		grow(&in)
		if memoryOverhead(in, p) <= memoryOverhead(base, p) {
			t.Errorf("one more %s does not raise the overhead", name)
		}
	}
}

func TestRendererMemoryOverhead(t *testing.T) {
	r := newTestRenderer(t, nil)
	vmi := &v1.VirtualMachineInstance{}
	readObject(t, "containerdisk-minimal.vmi.yaml", vmi)
	// 220Mi + 64M/512 + 8Mi + 8Mi + 2 disks × 4Mi + 2Mi + 32Mi, rounded up.
	if got := r.MemoryOverhead(vmi); got.Value() != 279*mi {
		t.Errorf("MemoryOverhead %s, want 279Mi", got.String())
	}
	if got := r.MemoryOverhead(nil); !got.IsZero() {
		t.Errorf("MemoryOverhead(nil) = %s", got.String())
	}
	// A VMI RenderLaunchPod rejects still gets an overhead (no page tables
	// without guest memory).
	bad := vmi.DeepCopy()
	bad.Spec.Domain.Resources = v1.ResourceRequirements{}
	if got := r.MemoryOverhead(bad); got.Value() != 278*mi {
		t.Errorf("MemoryOverhead without memory %s, want 278Mi", got.String())
	}
}

// TestTPMOverhead: a TPM adds swtpm's 53Mi to the overhead and to the
// rendered pod's memory request; a TPM turned off adds nothing.
func TestTPMOverhead(t *testing.T) {
	r := newTestRenderer(t, nil)
	vmi := &v1.VirtualMachineInstance{}
	readObject(t, "containerdisk-minimal.vmi.yaml", vmi)
	request := func(vmi *v1.VirtualMachineInstance) int64 {
		t.Helper()
		pod, err := r.RenderLaunchPod(vmi)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pod.Spec.Containers {
			if c.Name == "compute" {
				return c.Resources.Requests.Memory().Value()
			}
		}
		t.Fatal("no compute container")
		return 0
	}
	without, podWithout := r.MemoryOverhead(vmi), request(vmi)
	off := false
	for _, tc := range []struct {
		tpm  *v1.TPMDevice
		more int64
	}{{&v1.TPMDevice{}, 53 * mi}, {&v1.TPMDevice{Enabled: &off}, 0}} {
		with := vmi.DeepCopy()
		with.Spec.Domain.Devices.TPM = tc.tpm
		if got := r.MemoryOverhead(with); got.Value()-without.Value() != tc.more {
			t.Errorf("TPM %+v: overhead %s, want %d bytes more than %s", tc.tpm, got.String(), tc.more, without.String())
		}
		if got := request(with); got-podWithout != tc.more {
			t.Errorf("TPM %+v: the pod requests %d bytes, want %d more than %d", tc.tpm, got, tc.more, podWithout)
		}
	}
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

func TestComputeResources(t *testing.T) {
	const overhead = 300 * mi
	tests := []struct {
		name      string
		facts     guestFacts
		res       v1.ResourceRequirements
		emulation bool
		want      corev1.ResourceRequirements
	}{{
		name:  "memory request plus overhead, CPU from the allocation ratio, KVM devices",
		facts: guestFacts{vcpus: 2, guestMemory: 1 << 30, tap: true},
		res:   v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("200m"), "memory": q("1324Mi"), "ephemeral-storage": q("50M"),
				v1.KVMDevice: q("1"), v1.TunDevice: q("1")},
			Limits: corev1.ResourceList{v1.KVMDevice: q("1"), v1.TunDevice: q("1")},
		},
	}, {
		name:      "emulation: no kvm; tun stays for the tap device",
		facts:     guestFacts{vcpus: 1, guestMemory: 1 << 30, tap: true},
		res:       v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
		emulation: true,
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("1324Mi"), "ephemeral-storage": q("50M"), v1.TunDevice: q("1")},
			Limits:   corev1.ResourceList{v1.TunDevice: q("1")},
		},
	}, {
		name:      "no NIC, emulation: no device at all",
		facts:     guestFacts{vcpus: 1, guestMemory: 1 << 30},
		res:       v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
		emulation: true,
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("1324Mi"), "ephemeral-storage": q("50M")},
		},
	}, {
		name:  "guest memory above the request: overcommitted, the pod asks for the request and the overhead, as KubeVirt's",
		facts: guestFacts{vcpus: 1, guestMemory: 2 << 30},
		res:   v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("1324Mi"), "ephemeral-storage": q("50M"), v1.KVMDevice: q("1")},
			Limits:   corev1.ResourceList{v1.KVMDevice: q("1")},
		},
	}, {
		name:  "overcommitGuestOverhead leaves the overhead out of the request, not the limit",
		facts: guestFacts{vcpus: 1, guestMemory: 1 << 30},
		res: v1.ResourceRequirements{OvercommitGuestOverhead: true,
			Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}, Limits: corev1.ResourceList{corev1.ResourceMemory: q("2Gi")}},
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("1Gi"), "ephemeral-storage": q("50M"), v1.KVMDevice: q("1")},
			Limits:   corev1.ResourceList{"memory": q("2348Mi"), v1.KVMDevice: q("1")},
		},
	}, {
		name:  "the VMI's CPU request and limit, other resources passed through",
		facts: guestFacts{vcpus: 4, guestMemory: 1 << 30},
		res: v1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: q("1Gi"), "cpu": q("1500m"), "ephemeral-storage": q("1Gi"), "nvidia.com/gpu": q("1")},
			Limits:   corev1.ResourceList{"cpu": q("3"), "nvidia.com/gpu": q("1")},
		},
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("1500m"), "memory": q("1324Mi"), "ephemeral-storage": q("1123741824"), "nvidia.com/gpu": q("1"), v1.KVMDevice: q("1")},
			Limits:   corev1.ResourceList{"cpu": q("3"), "nvidia.com/gpu": q("1"), v1.KVMDevice: q("1")},
		},
	}, {
		name:  "a CPU limit without a request becomes the request",
		facts: guestFacts{vcpus: 8, guestMemory: 1 << 30},
		res:   v1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1Gi")}, Limits: corev1.ResourceList{"cpu": q("500m")}},
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("1324Mi"), "ephemeral-storage": q("50M"), v1.KVMDevice: q("1")},
			Limits:   corev1.ResourceList{"cpu": q("500m"), v1.KVMDevice: q("1")},
		},
	}, {
		name:  "dedicated CPUs: Guaranteed, one more CPU for the emulator thread",
		facts: guestFacts{vcpus: 4, guestMemory: 1 << 30, dedicated: true, emulatorThread: true},
		res:   v1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1Gi")}},
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("5"), "memory": q("1324Mi"), "ephemeral-storage": q("50M"), v1.KVMDevice: q("1")},
			Limits:   corev1.ResourceList{"cpu": q("5"), "memory": q("1324Mi"), v1.KVMDevice: q("1")},
		},
	}, {
		name:  "huge pages carry the guest memory; memory only the overhead",
		facts: guestFacts{vcpus: 1, guestMemory: 2 << 30, hugePages: "1Gi"},
		res:   v1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("2Gi")}, Limits: corev1.ResourceList{"memory": q("3Gi")}},
		want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("100m"), "memory": q("300Mi"), "hugepages-1Gi": q("2Gi"), "ephemeral-storage": q("50M"), v1.KVMDevice: q("1")},
			Limits:   corev1.ResourceList{"memory": q("1324Mi"), "hugepages-1Gi": q("2Gi"), v1.KVMDevice: q("1")},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{CPUAllocationRatio: 10, EmulationAllowed: tt.emulation}
			spec := &v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: tt.res}}
			got, err := computeResources(&tt.facts, spec, &cfg, overhead)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputeResourcesErrors(t *testing.T) {
	tests := []struct {
		name  string
		facts guestFacts
		res   v1.ResourceRequirements
		want  string
	}{
		{"CPU request above limit", guestFacts{vcpus: 1, guestMemory: 1 << 30},
			v1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("2")}, Limits: corev1.ResourceList{"cpu": q("1")}},
			"spec.domain.resources.requests.cpu: 2 is more than the limit 1"},
		{"memory limit below the guest", guestFacts{vcpus: 1, guestMemory: 2 << 30},
			v1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("1Gi")}},
			"spec.domain.resources.limits.memory: 1Gi is less than the guest memory"},
		{"memory request above limit", guestFacts{vcpus: 1, guestMemory: 1 << 30},
			v1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("3Gi")}, Limits: corev1.ResourceList{"memory": q("2Gi")}},
			"spec.domain.resources.requests.memory: the pod would request"},
		{"dedicated CPUs below the request", guestFacts{vcpus: 2, guestMemory: 1 << 30, dedicated: true},
			v1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("3")}},
			"spec.domain.resources.requests.cpu: 3 is more than the 2 dedicated CPUs"},
		{"negative memory request", guestFacts{vcpus: 1, guestMemory: 1 << 30},
			v1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("-1")}},
			"spec.domain.resources.requests.memory: -1 must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.facts.ref = objectRef{kind: kindVMI, namespace: "ns", name: "vm"}
			spec := &v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: tt.res}}
			_, err := computeResources(&tt.facts, spec, &Config{CPUAllocationRatio: 10}, 300*mi)
			if err == nil || !strings.Contains(err.Error(), "VirtualMachineInstance ns/vm: "+tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestHelperResources(t *testing.T) {
	tests := []struct {
		name               string
		dedicated, scratch bool
		want               corev1.ResourceRequirements
	}{
		{"burstable", false, false, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("10m"), "memory": q("1M")},
			Limits:   corev1.ResourceList{"cpu": q("100m"), "memory": q("40M")},
		}},
		{"guaranteed", true, false, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("10m"), "memory": q("40M")},
			Limits:   corev1.ResourceList{"cpu": q("10m"), "memory": q("40M")},
		}},
		{"disk sidecar scratch space", false, true, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("10m"), "memory": q("1M"), "ephemeral-storage": q("50M")},
			Limits:   corev1.ResourceList{"cpu": q("100m"), "memory": q("40M")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := helperResources(tt.dedicated, tt.scratch)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
