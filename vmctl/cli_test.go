package vmctl

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func TestExpose(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vmi1", Namespace: "ns1", UID: "vmi-uid"},
	}
	vm := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: "vm-uid"},
		Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{{
				Name:                   "default",
				InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}},
				Ports:                  []v1.Port{{Port: 80}, {Port: 53, Protocol: "UDP"}},
			}}}},
		}}},
	}
	named := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm2", Namespace: "ns1", UID: "vm2-uid"},
		Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
			Hostname: "web",
		}}},
	}
	no := false
	yes := true
	owner := func(kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: &yes, BlockOwnerDeletion: &no}}
	}
	tests := []struct {
		name string
		args []string
		want *corev1.Service
	}{
		{name: "vmi", args: []string{"expose", "vmi", "vmi1", "--name", "ssh", "--port", "2222", "--target-port", "22", "--type", "NodePort"},
			want: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "ssh", Namespace: "ns1", OwnerReferences: owner("VirtualMachineInstance", "vmi1", "vmi-uid")},
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeNodePort,
					Selector: map[string]string{"vm.kubevirt.io/name": "vmi1"},
					Ports:    []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 2222, TargetPort: intstr.FromInt32(22)}},
				},
			}},
		{name: "vm, ports of its pod network interface", args: []string{"expose", "vm", "vm1", "--name", "web"},
			want: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", OwnerReferences: owner("VirtualMachine", "vm1", "vm-uid")},
				Spec: corev1.ServiceSpec{
					Type:     corev1.ServiceTypeClusterIP,
					Selector: map[string]string{"vm.kubevirt.io/name": "vm1"},
					Ports: []corev1.ServicePort{
						{Name: "port-1", Protocol: corev1.ProtocolTCP, Port: 80},
						{Name: "port-2", Protocol: corev1.ProtocolUDP, Port: 53},
					},
				},
			}},
		{name: "vm with a host name, dual stack", args: []string{"expose", "virtualmachine", "vm2", "--name", "web2", "--port", "80", "--protocol", "udp", "--ip-family", "IPv4,IPv6", "--cluster-ip", "None"},
			want: &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web2", Namespace: "ns1", OwnerReferences: owner("VirtualMachine", "vm2", "vm2-uid")},
				Spec: corev1.ServiceSpec{
					Type:           corev1.ServiceTypeClusterIP,
					ClusterIP:      "None",
					Selector:       map[string]string{"vm.kubevirt.io/name": "web"},
					Ports:          []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: 80}},
					IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
					IPFamilyPolicy: ptr(corev1.IPFamilyPolicyPreferDualStack),
				},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t)
			kube := kubefake.NewClientset()
			out, _, err := api.run(Options{KubeClient: kube, VMClient: fake.NewSimpleClientset(vmi, vm, named)}, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if want := "Service " + tc.want.Name + " successfully exposed for " + tc.args[1] + " " + tc.args[2] + "\n"; out != want {
				t.Errorf("output %q, want %q", out, want)
			}
			got, err := kube.CoreV1().Services("ns1").Get(t.Context(), tc.want.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ignore := cmp.Options{cmpopts.IgnoreFields(corev1.Service{}, "TypeMeta"), cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields")}
			if d := cmp.Diff(tc.want, got, ignore); d != "" {
				t.Errorf("Service (-want +got):\n%s", d)
			}
		})
	}

	api := newFakeAPI(t)
	_, _, err := api.run(Options{KubeClient: kubefake.NewClientset(), VMClient: fake.NewSimpleClientset(vmi)}, "expose", "vmi", "vmi1", "--name", "x")
	if err == nil || !strings.Contains(err.Error(), "couldn't find port via --port flag or introspection") {
		t.Errorf("expose without ports: error %v", err)
	}
	_, _, err = api.run(Options{KubeClient: kubefake.NewClientset(), VMClient: fake.NewSimpleClientset()}, "expose", "vm", "nope", "--name", "x", "--port", "1")
	if err == nil || !strings.Contains(err.Error(), "error fetching VirtualMachine nope") {
		t.Errorf("expose of a missing VM: error %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestSSHAndSCPRunTheLocalClients checks the ssh and scp command lines:
// the ProxyCommand is this program's port-forward --stdio=true with the
// user's connection flags.
func TestSSHAndSCPRunTheLocalClients(t *testing.T) {
	api := newFakeAPI(t)
	self := "/opt/my tools/vmctl"
	proxy := "ProxyCommand='/opt/my tools/vmctl' --kubeconfig=" + api.kubeconfig + " port-forward --stdio=true "
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"ssh", "jdoe@vmi/vmi1"},
			[]string{"ssh", "-o", proxy + "vmi/vmi1/ns1 22", "jdoe@vmi.vmi1.ns1"}},
		{[]string{"ssh", "-i", "/k/id", "-p", "2222", "-t", "-o StrictHostKeyChecking=no", "--known-hosts", "/k/kh", "-l", "alice", "vm/vm1/other", "-c", "uname -a"},
			[]string{"ssh", "-o", proxy + "vm/vm1/other 2222", "-o", "UserKnownHostsFile=/k/kh", "-o", "StrictHostKeyChecking=no", "-i", "/k/id", "alice@vm.vm1.other", "uname -a"}},
		{[]string{"scp", "-r", "--preserve", "./dir", "jdoe@vmi/vmi1.ns2:/tmp/dir"},
			[]string{"scp", "-o", proxy + "vmi/vmi1/ns2 22", "-r", "-p", "./dir", "jdoe@vmi.vmi1.ns2:/tmp/dir"}},
		{[]string{"scp", "vmi/vmi1:/etc/hostname", "out.txt"},
			[]string{"scp", "-o", proxy + "vmi/vmi1/ns1 22", "vmi.vmi1.ns1:/etc/hostname", "out.txt"}},
	}
	for _, tc := range tests {
		var ran []*exec.Cmd
		_, _, err := api.run(Options{Executable: self, RunCommand: func(c *exec.Cmd) error {
			ran = append(ran, c)
			return nil
		}}, tc.args...)
		if err != nil {
			t.Fatalf("vmctl %v: %v", tc.args, err)
		}
		if len(ran) != 1 {
			t.Fatalf("vmctl %v ran %d commands", tc.args, len(ran))
		}
		if d := cmp.Diff(tc.want, ran[0].Args); d != "" {
			t.Errorf("vmctl %v ran (-want +got):\n%s", tc.args, d)
		}
	}
	if n := len(api.recorded()); n != 0 {
		t.Errorf("ssh and scp sent %d requests themselves", n)
	}
}

// TestProxyCommandQuoting: the shell ssh runs the ProxyCommand with splits
// it into the words vmctl meant.
func TestProxyCommandQuoting(t *testing.T) {
	words := []string{"/opt/my tools/vmctl", "--as-group=it's", "port-forward", "--stdio=true", "vmi/a/b", "22", ""}
	out, err := exec.Command("sh", "-c", `for w in `+shellJoin(words)+`; do printf '[%s]' "$w"; done`).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	want := "[/opt/my tools/vmctl][--as-group=it's][port-forward][--stdio=true][vmi/a/b][22][]"
	if string(out) != want {
		t.Errorf("the shell read %s, want %s", out, want)
	}
}

// TestKubectlPlugin: invoked as kubectl-vmctl, help and examples say
// "kubectl vmctl", and completion is generated for the binary's name, not
// kubectl's.
func TestKubectlPlugin(t *testing.T) {
	for _, tc := range []struct{ argv0, use, display string }{
		{"/usr/local/bin/kubectl-vmctl", "kubectl-vmctl", "kubectl vmctl"},
		{"kubectl-vm_ctl.exe", "kubectl-vm_ctl", "kubectl vm-ctl"},
		{"kubectl-vm-ctl", "kubectl-vm-ctl", "kubectl vm ctl"},
		{"./vmctl", "vmctl", "vmctl"},
		{"vmctl-linux-amd64", "vmctl", "vmctl"},
		{"kubectl-", "vmctl", "vmctl"},
	} {
		use, display := ProgramName(tc.argv0)
		if use != tc.use || display != tc.display {
			t.Errorf("ProgramName(%q) = %q, %q, want %q, %q", tc.argv0, use, display, tc.use, tc.display)
		}
	}

	api := newFakeAPI(t)
	out, _, err := api.run(Options{Name: "/usr/local/bin/kubectl-vmctl"}, "start", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage:\n  kubectl vmctl start (VM) [flags]", "  kubectl vmctl start myvm\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl-vmctl start --help lacks %q:\n%s", want, out)
		}
	}
	out, _, err = api.run(Options{Name: "/usr/local/bin/kubectl-vmctl"}, "completion", "bash")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "__start_kubectl-vmctl") || strings.Contains(out, " kubectl\n") {
		t.Errorf("kubectl-vmctl completion bash is not for kubectl-vmctl:\n%.400s", out)
	}
}

// TestCompletion: the scripts, and VM and VMI names from the cluster.
func TestCompletion(t *testing.T) {
	api := newFakeAPI(t)
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_vmctl vmctl",
		"zsh":  "#compdef vmctl",
		"fish": "complete -c vmctl ",
	} {
		out, _, err := api.run(Options{}, "completion", shell)
		if err != nil {
			t.Fatalf("completion %s: %v", shell, err)
		}
		if !strings.Contains(out, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}

	vms := fake.NewSimpleClientset(
		&v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1"}},
		&v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns1"}},
		&v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "wiki", Namespace: "other"}},
		&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1"}},
	)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "start", "w"}, "web\n:4\n"},
		{[]string{"__complete", "-n", "other", "stop", ""}, "wiki\n:4\n"},
		{[]string{"__complete", "start", "web", ""}, ":4\n"},
		{[]string{"__complete", "console", ""}, "web\n:4\n"},
		{[]string{"__complete", "pause", ""}, "vm\nvmi\n:4\n"},
		{[]string{"__complete", "pause", "vm", ""}, "db\nweb\n:4\n"},
		{[]string{"__complete", "expand", "--vm", "d"}, "db\n:4\n"},
		{[]string{"__complete", "start", "-n", "de"}, "default\ndev\n:4\n"},
	} {
		kube := kubefake.NewClientset(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev"}},
		)
		out, _, err := api.run(Options{VMClient: vms, KubeClient: kube}, tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if out != tc.want {
			t.Errorf("%v completed %q, want %q", tc.args, out, tc.want)
		}
	}
}
