package export

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vmkit/vmkit/internal/pki"
	exportv1 "github.com/vmkit/vmkit/vmapi/export/v1beta1"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

// kube adapts client-go's fake clientset to Kube.
type kube struct{ cs *fake.Clientset }

func (k kube) Pods(ns string) kubeclient.PodInterface         { return k.cs.CoreV1().Pods(ns) }
func (k kube) Services(ns string) kubeclient.ServiceInterface { return k.cs.CoreV1().Services(ns) }
func (k kube) Secrets(ns string) kubeclient.SecretInterface   { return k.cs.CoreV1().Secrets(ns) }
func (k kube) ConfigMaps(ns string) kubeclient.ConfigMapInterface {
	return k.cs.CoreV1().ConfigMaps(ns)
}

// created is the real clock's time: the serving certificate is verified
// against the real clock, and is valid for the export's TTL from creation.
var created = time.Now().UTC().Truncate(time.Second)

type fixture struct {
	t       *testing.T
	kube    *fake.Clientset
	vms     *vmfake.Clientset
	c       *Controller
	ca      *x509.Certificate
	now     time.Time
	indexer map[string]cache.Indexer
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	ca, caKey, err := pki.Issue(&x509.Certificate{Subject: pkix.Name{CommonName: "export CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: created.Add(-time.Hour), NotAfter: created.Add(365 * 24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ca: ca, now: created.Add(time.Minute), indexer: map[string]cache.Indexer{}}
	f.kube = fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-export-ca", Namespace: "kubevirt"},
		Data:       map[string][]byte{corev1.TLSCertKey: pki.CertPEM(ca), corev1.TLSPrivateKeyKey: pki.KeyPEM(caKey)},
	})
	f.vms = vmfake.NewSimpleClientset()
	informer := func(name string, example runtime.Object) cache.SharedIndexInformer {
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		f.indexer[name] = inf.GetIndexer()
		return inf
	}
	f.c, err = New(Config{
		Exports: f.vms.ExportV1beta1(), Kube: kube{f.kube},
		Issuer: SecretIssuer{Secrets: f.kube.CoreV1().Secrets("kubevirt"), Name: "kubevirt-export-ca"},
		Image:  "vmkit/virt-exportserver:devel", Now: func() time.Time { return f.now },
		ExportInformer: informer("exports", &exportv1.VirtualMachineExport{}), Pods: informer("pods", &corev1.Pod{}),
		Claims: informer("claims", &corev1.PersistentVolumeClaim{}), VMs: informer("vms", &v1.VirtualMachine{}),
		VMIs: informer("vmis", &v1.VirtualMachineInstance{}), Snapshots: informer("snapshots", &snapshotv1.VirtualMachineSnapshot{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		f.add(o)
	}
	return f
}

// add puts an object into its informer's cache (and exports into the fake
// API, whose status the controller updates).
func (f *fixture) add(o runtime.Object) {
	f.t.Helper()
	var name string
	switch o := o.(type) {
	case *exportv1.VirtualMachineExport:
		name = "exports"
		if _, err := f.vms.ExportV1beta1().VirtualMachineExports(o.Namespace).Create(f.t.Context(), o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			f.t.Fatal(err)
		}
	case *corev1.Pod:
		name = "pods"
	case *corev1.PersistentVolumeClaim:
		name = "claims"
	case *v1.VirtualMachine:
		name = "vms"
	case *v1.VirtualMachineInstance:
		name = "vmis"
	case *snapshotv1.VirtualMachineSnapshot:
		name = "snapshots"
	}
	if err := f.indexer[name].Update(o); err != nil {
		f.t.Fatal(err)
	}
}

// sync runs one sync of the export and returns its stored state (nil when
// deleted).
func (f *fixture) sync(name string) *exportv1.VirtualMachineExport {
	f.t.Helper()
	if err := f.c.sync(f.t.Context(), "ns/"+name); err != nil && !reconcile.IsRequeue(err) {
		f.t.Fatalf("sync: %v", err)
	}
	e, err := f.vms.ExportV1beta1().VirtualMachineExports("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.indexer["exports"].Update(e); err != nil {
		f.t.Fatal(err)
	}
	return e
}

func vmExport(name string, kind, group, source string) *exportv1.VirtualMachineExport {
	e := &exportv1.VirtualMachineExport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "export-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec:       exportv1.VirtualMachineExportSpec{Source: corev1.TypedLocalObjectReference{Kind: kind, Name: source}},
	}
	if group != "" {
		e.Spec.Source.APIGroup = &group
	}
	return e
}

func boundClaim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
}

func stoppedVM(claims ...string) *v1.VirtualMachine {
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid", ResourceVersion: "7"},
		Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{}}}
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v1.Volume{Name: "containerdisk",
		VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "vmkit/tiny-guest"}}})
	for _, c := range claims {
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v1.Volume{Name: c, VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}}})
	}
	return vm
}

func condition(e *exportv1.VirtualMachineExport, t exportv1.ConditionType) exportv1.Condition {
	for _, c := range e.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return exportv1.Condition{}
}

// TestExportOfStoppedVM: the server's objects, its pod, and the phases
// Pending → Ready with KubeVirt's internal links.
func TestExportOfStoppedVM(t *testing.T) {
	f := newFixture(t, boundClaim("disk"), stoppedVM("disk"), vmExport("x", "VirtualMachine", "kubevirt.io", "vm"))
	e := f.sync("x")
	if e.Status.Phase != exportv1.Pending || condition(e, exportv1.ConditionReady).Reason != ReasonPodPending ||
		condition(e, exportv1.ConditionPVC).Reason != ReasonPVCBound || e.Status.ServiceName != "virt-export-x" ||
		*e.Status.TokenSecretRef != "export-token-x" || *e.Status.VirtualMachineName != "vm" ||
		!e.Status.TTLExpirationTime.Time.Equal(created.Add(2*time.Hour)) || e.Status.Links != nil {
		t.Fatalf("status after the first sync: %+v", e.Status)
	}
	ctx := t.Context()
	token, err := f.kube.CoreV1().Secrets("ns").Get(ctx, "export-token-x", metav1.GetOptions{})
	if err != nil || len(token.Data["token"]) < 20 || !metav1.IsControlledBy(token, e) {
		t.Errorf("token Secret: %+v (%v)", token, err)
	}
	svc, err := f.kube.CoreV1().Services("ns").Get(ctx, "virt-export-x", metav1.GetOptions{})
	if err != nil || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.IntVal != 8443 || svc.Spec.Selector[ServiceLabel] != "virt-export-x" {
		t.Errorf("Service: %+v (%v)", svc, err)
	}
	// The serving certificate chains to the export CA for the Service's names.
	tlsSecret, err := f.kube.CoreV1().Secrets("ns").Get(ctx, "virt-export-tls-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(tlsSecret.Data[corev1.TLSCertKey])
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(f.ca)
	for _, name := range []string{"virt-export-x.ns.svc", "virt-export-x", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("the serving certificate does not verify for %s: %v", name, err)
		}
	}
	// The manifest data: the VM without server-set fields and status.
	cm, err := f.kube.CoreV1().ConfigMaps("ns").Get(ctx, "exporter-vm-manifest-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vm map[string]any
	if err := json.Unmarshal([]byte(cm.Data["virtualmachine-manifest"]), &vm); err != nil {
		t.Fatal(err)
	}
	md := vm["metadata"].(map[string]any)
	if vm["kind"] != "VirtualMachine" || md["name"] != "vm" || md["uid"] != nil || md["resourceVersion"] != nil || vm["status"] != nil ||
		cm.Data["internal_host"] != "virt-export-x.ns.svc" || cm.Data["export-name"] != "x" {
		t.Errorf("manifest data: %v", cm.Data)
	}
	pod, err := f.kube.CoreV1().Pods("ns").Get(ctx, "virt-export-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	want := map[string]string{
		"CERT_FILE": "/cert/tls.crt", "KEY_FILE": "/cert/tls.key", "TOKEN_FILE": "/token/token",
		"DEADLINE": created.Add(2 * time.Hour).Format(time.RFC3339), "EXPORT_VM_DEF_URI": "/manifests/all", "EXPORT_SECRET_DEF_URI": "/manifests/secret",
		"VOLUME0_EXPORT_PATH": "/export-volumes/disk", "VOLUME0_EXPORT_RAW_URI": "/volumes/disk/disk.img",
		"VOLUME0_EXPORT_RAW_GZIP_URI": "/volumes/disk/disk.img.gz",
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("server environment (-want +got):\n%s", diff)
	}
	if sc := pod.Spec.SecurityContext; *sc.RunAsUser != 107 || !*sc.RunAsNonRoot || pod.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		pod.Labels[v1.AppLabel] != exportv1.App || !metav1.IsControlledBy(pod, e) ||
		!slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "disk" && v.PersistentVolumeClaim.ReadOnly
		}) {
		t.Errorf("pod: %+v", pod)
	}

	// The server is ready: the export is, with the links.
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	f.add(pod)
	e = f.sync("x")
	wantLinks := &exportv1.VirtualMachineExportLinks{Internal: &exportv1.VirtualMachineExportLink{
		Cert: string(pki.CertPEM(f.ca)),
		Volumes: []exportv1.VirtualMachineExportVolume{{Name: "disk", Formats: []exportv1.VirtualMachineExportVolumeFormat{
			{Format: exportv1.KubeVirtRaw, Url: "https://virt-export-x.ns.svc/volumes/disk/disk.img"},
			{Format: exportv1.KubeVirtGz, Url: "https://virt-export-x.ns.svc/volumes/disk/disk.img.gz"},
		}}},
		Manifests: []exportv1.VirtualMachineExportManifest{
			{Type: exportv1.AllManifests, Url: "https://virt-export-x.ns.svc/internal/manifests/all"},
			{Type: exportv1.AuthHeader, Url: "https://virt-export-x.ns.svc/internal/manifests/secret"},
		},
	}}
	if e.Status.Phase != exportv1.Ready || condition(e, exportv1.ConditionReady).Reason != ReasonPodReady {
		t.Errorf("status once the pod is ready: %+v", e.Status)
	}
	if diff := cmp.Diff(wantLinks, e.Status.Links); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	// A sync with nothing new writes nothing.
	before := len(f.vms.Actions())
	f.sync("x")
	if writes := f.vms.Actions()[before:]; len(writes) != 1 || writes[0].GetVerb() != "get" { // the fixture's read back
		t.Errorf("an idle sync wrote: %v", writes)
	}

	// The server stopped (its deadline): Terminated.
	pod.Status.Phase = corev1.PodSucceeded
	f.add(pod)
	if e = f.sync("x"); e.Status.Phase != exportv1.Terminated || condition(e, exportv1.ConditionReady).Reason != ReasonPodCompleted || e.Status.Links != nil {
		t.Errorf("status once the pod ended: %+v", e.Status)
	}

	// The time to live ends: the export is deleted.
	f.now = created.Add(2 * time.Hour)
	if e = f.sync("x"); e != nil {
		t.Errorf("the export outlived its time to live: %+v", e.Status)
	}
}

// TestExportWaitsOrSkips: a source that runs, is missing or has no claims
// gets no server.
func TestExportWaitsOrSkips(t *testing.T) {
	running := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"},
		Spec:   v1.VirtualMachineInstanceSpec{Volumes: stoppedVM("disk").Spec.Template.Spec.Volumes},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}}
	pending := boundClaim("disk")
	pending.Status.Phase = corev1.ClaimPending
	for _, tc := range []struct {
		name   string
		objs   []runtime.Object
		export *exportv1.VirtualMachineExport
		phase  exportv1.VirtualMachineExportPhase
		reason string
	}{
		{"running VM", []runtime.Object{boundClaim("disk"), stoppedVM("disk"), running}, vmExport("x", "VirtualMachine", "kubevirt.io", "vm"), exportv1.Pending, ReasonInUse},
		{"claim of a running VMI", []runtime.Object{boundClaim("disk"), running}, vmExport("x", "PersistentVolumeClaim", "", "disk"), exportv1.Pending, ReasonInUse},
		{"no VM", nil, vmExport("x", "VirtualMachine", "kubevirt.io", "vm"), exportv1.Pending, ReasonVMNotFound},
		{"no claim", nil, vmExport("x", "PersistentVolumeClaim", "", "disk"), exportv1.Pending, ReasonPVCNotFound},
		{"claim of the VM missing", []runtime.Object{stoppedVM("disk")}, vmExport("x", "VirtualMachine", "kubevirt.io", "vm"), exportv1.Pending, ReasonPVCNotFound},
		{"unbound claim", []runtime.Object{pending}, vmExport("x", "PersistentVolumeClaim", "", "disk"), exportv1.Pending, ReasonPVCPending},
		{"VM without claims", []runtime.Object{stoppedVM()}, vmExport("x", "VirtualMachine", "kubevirt.io", "vm"), exportv1.Skipped, ReasonVMNoVolumes},
		{"no snapshot", nil, vmExport("x", "VirtualMachineSnapshot", "snapshot.kubevirt.io", "snap"), exportv1.Pending, ReasonSnapshotNotFound},
		{"snapshot without volumes", []runtime.Object{&snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "ns"}}},
			vmExport("x", "VirtualMachineSnapshot", "snapshot.kubevirt.io", "snap"), exportv1.Skipped, ReasonSnapshotNoVolumes},
		{"other kind", nil, vmExport("x", "Pod", "", "p"), exportv1.Skipped, ReasonUnknownSourceKind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append(tc.objs, tc.export)...)
			e := f.sync("x")
			if got := condition(e, exportv1.ConditionReady); e.Status.Phase != tc.phase || got.Reason != tc.reason || got.Status != corev1.ConditionFalse || got.Message == "" {
				t.Errorf("phase %s, Ready %+v; want %s, %s", e.Status.Phase, got, tc.phase, tc.reason)
			}
			if pods, _ := f.kube.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{}); len(pods.Items) != 0 {
				t.Errorf("a server pod was created: %v", pods.Items[0].Name)
			}
		})
	}

	// A VM that starts while its export is served: the pod goes.
	f := newFixture(t, boundClaim("disk"), stoppedVM("disk"), vmExport("x", "VirtualMachine", "kubevirt.io", "vm"))
	f.sync("x")
	pod, err := f.kube.CoreV1().Pods("ns").Get(t.Context(), "virt-export-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.add(pod)
	f.add(running)
	if e := f.sync("x"); e.Status.Phase != exportv1.Pending || condition(e, exportv1.ConditionReady).Reason != ReasonInUse {
		t.Errorf("status once the VM runs: %+v", e.Status)
	}
	if _, err := f.kube.CoreV1().Pods("ns").Get(t.Context(), "virt-export-x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the server pod of a running VM was kept: %v", err)
	}
}

// TestClaimFormats: a claim a VM does not use is served as files unless it
// is Block or CDI marked it as a disk image, as KubeVirt's.
func TestClaimFormats(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	for _, tc := range []struct {
		name  string
		edit  func(*corev1.PersistentVolumeClaim)
		wants []exportv1.ExportVolumeFormat
	}{
		{"files", func(*corev1.PersistentVolumeClaim) {}, []exportv1.ExportVolumeFormat{exportv1.Dir, exportv1.ArchiveGz}},
		{"kubevirt content", func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{ContentTypeAnnotation: "kubevirt"}
		}, []exportv1.ExportVolumeFormat{exportv1.KubeVirtRaw, exportv1.KubeVirtGz}},
		{"block", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block }, []exportv1.ExportVolumeFormat{exportv1.KubeVirtRaw, exportv1.KubeVirtGz}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := boundClaim("data")
			tc.edit(claim)
			f := newFixture(t, claim, vmExport("x", "PersistentVolumeClaim", "", "data"))
			f.sync("x")
			pod, err := f.kube.CoreV1().Pods("ns").Get(t.Context(), "virt-export-x", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			f.add(pod)
			e := f.sync("x")
			var got []exportv1.ExportVolumeFormat
			for _, format := range e.Status.Links.Internal.Volumes[0].Formats {
				got = append(got, format.Format)
			}
			if diff := cmp.Diff(tc.wants, got); diff != "" || e.Status.Links.Internal.Manifests != nil {
				t.Errorf("formats (-want +got):\n%s\nmanifests %v", diff, e.Status.Links.Internal.Manifests)
			}
			if isBlock(claim) != (len(pod.Spec.Containers[0].VolumeDevices) == 1) {
				t.Errorf("block claim as a device: %+v", pod.Spec.Containers[0])
			}
		})
	}
}

func TestShortName(t *testing.T) {
	long := "a-very-long-export-name-that-does-not-fit-in-a-dns-label-at-all-x"
	got := shortName(namePrefix, long)
	if len(got) > maxNameLength || got[:len(namePrefix)+1] != namePrefix+"-" || got == shortName(namePrefix, long+"y") {
		t.Errorf("shortName = %q (%d)", got, len(got))
	}
	if got := shortName(namePrefix, "x"); got != "virt-export-x" {
		t.Errorf("shortName = %q", got)
	}
}

// TestTokenSecretCreatedOnce: the token Secret is created by the first
// sync; later syncs (every pod, claim and VM event of the namespace) send
// no request for it.
func TestTokenSecretCreatedOnce(t *testing.T) {
	f := newFixture(t, boundClaim("disk"), stoppedVM("disk"), vmExport("x", "VirtualMachine", "kubevirt.io", "vm"))
	f.sync("x")
	f.sync("x")
	f.sync("x")
	creates := 0
	for _, a := range f.kube.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "secrets" {
			if s, ok := c.GetObject().(*corev1.Secret); ok && s.Name == "export-token-x" {
				creates++
			}
		}
	}
	if creates != 1 {
		t.Errorf("the token Secret was created %d times in three syncs, want once", creates)
	}
}
