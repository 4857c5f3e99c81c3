package snapshot

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	snapshotv1 "github.com/vmkit/vmkit/vmapi/snapshot/v1beta1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/reconcile"
)

var created = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

type fixture struct {
	t   *testing.T
	cs  *fake.Clientset
	c   *Controller
	now time.Time
	idx map[string]cache.Indexer
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, cs: fake.NewSimpleClientset(), now: created.Add(time.Second), idx: map[string]cache.Indexer{}}
	inf := func(name string, example runtime.Object) cache.SharedIndexInformer {
		i := cache.NewSharedIndexInformer(&cache.ListWatch{}, example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		f.idx[name] = i.GetIndexer()
		return i
	}
	var err error
	f.c, err = New(Config{
		Client: f.cs.KubevirtV1(), Snapshots: f.cs.SnapshotV1beta1(), Now: func() time.Time { return f.now },
		SnapshotInformer: inf("snapshots", &snapshotv1.VirtualMachineSnapshot{}), Contents: inf("contents", &snapshotv1.VirtualMachineSnapshotContent{}),
		Restores: inf("restores", &snapshotv1.VirtualMachineRestore{}), VMs: inf("vms", &v1.VirtualMachine{}),
		VMIs: inf("vmis", &v1.VirtualMachineInstance{}), Claims: inf("claims", &corev1.PersistentVolumeClaim{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		f.create(o)
	}
	return f
}

// create puts o into the fake API and its informer's cache.
func (f *fixture) create(o runtime.Object) {
	f.t.Helper()
	ctx := f.t.Context()
	var err error
	switch o := o.(type) {
	case *v1.VirtualMachine:
		_, err = f.cs.KubevirtV1().VirtualMachines(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *snapshotv1.VirtualMachineSnapshot:
		_, err = f.cs.SnapshotV1beta1().VirtualMachineSnapshots(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *snapshotv1.VirtualMachineRestore:
		_, err = f.cs.SnapshotV1beta1().VirtualMachineRestores(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.cache(o)
}

func (f *fixture) cache(o runtime.Object) {
	f.t.Helper()
	name := map[string]string{"*v1.VirtualMachine": "vms", "*v1.VirtualMachineInstance": "vmis", "*v1.PersistentVolumeClaim": "claims",
		"*v1beta1.VirtualMachineSnapshot": "snapshots", "*v1beta1.VirtualMachineSnapshotContent": "contents", "*v1beta1.VirtualMachineRestore": "restores"}[typeName(o)]
	if err := f.idx[name].Update(o); err != nil {
		f.t.Fatal(err)
	}
}

func typeName(o runtime.Object) string {
	switch o.(type) {
	case *v1.VirtualMachine:
		return "*v1.VirtualMachine"
	case *v1.VirtualMachineInstance:
		return "*v1.VirtualMachineInstance"
	case *corev1.PersistentVolumeClaim:
		return "*v1.PersistentVolumeClaim"
	case *snapshotv1.VirtualMachineSnapshot:
		return "*v1beta1.VirtualMachineSnapshot"
	case *snapshotv1.VirtualMachineSnapshotContent:
		return "*v1beta1.VirtualMachineSnapshotContent"
	case *snapshotv1.VirtualMachineRestore:
		return "*v1beta1.VirtualMachineRestore"
	}
	return ""
}

// refresh copies the fake API's objects into the caches, as the informers
// would.
func (f *fixture) refresh() {
	f.t.Helper()
	ctx := f.t.Context()
	vms, _ := f.cs.KubevirtV1().VirtualMachines("ns").List(ctx, metav1.ListOptions{})
	snaps, _ := f.cs.SnapshotV1beta1().VirtualMachineSnapshots("ns").List(ctx, metav1.ListOptions{})
	contents, _ := f.cs.SnapshotV1beta1().VirtualMachineSnapshotContents("ns").List(ctx, metav1.ListOptions{})
	restores, _ := f.cs.SnapshotV1beta1().VirtualMachineRestores("ns").List(ctx, metav1.ListOptions{})
	for name, list := range map[string][]runtime.Object{"vms": objects(vms.Items), "snapshots": objects(snaps.Items), "contents": objects(contents.Items), "restores": objects(restores.Items)} {
		for _, k := range f.idx[name].ListKeys() {
			_ = f.idx[name].Delete(cache.ExplicitKey(k))
		}
		for _, o := range list {
			// A deleted object with finalizers stays, as the API keeps it.
			if err := f.idx[name].Add(o); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

func objects[T any, P interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// run syncs a key until it settles (at most 10 times), refreshing the
// caches between syncs.
func (f *fixture) run(sync func(key string) error, key string) {
	f.t.Helper()
	for range 10 {
		if err := sync(key); err != nil && !reconcile.IsRequeue(err) {
			f.t.Fatalf("sync %s: %v", key, err)
		}
		f.refresh()
	}
}

func (f *fixture) snapshot(name string) *snapshotv1.VirtualMachineSnapshot {
	s, err := f.cs.SnapshotV1beta1().VirtualMachineSnapshots("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func testVM(runStrategy v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid", Labels: map[string]string{"app": "vm"}},
		Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(runStrategy), Template: &v1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"version": "1"}},
			Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
				{Name: "containerdisk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
				{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
			}},
		}},
	}
}

func boundClaim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"},
		Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local-path")},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
}

func testSnapshot() *snapshotv1.VirtualMachineSnapshot {
	return &snapshotv1.VirtualMachineSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "ns", UID: "snap-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec:       snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm"}},
	}
}

// TestVolumeSnapshotStatuses: a VM the VM controller has synced gets
// KubeVirt's statuses; one it has not is left to it (its first status
// write carries them).
func TestVolumeSnapshotStatuses(t *testing.T) {
	vm := testVM(v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v1.Volume{Name: "gone", VolumeSource: v1.VolumeSource{
		DataVolume: &v1.DataVolumeSource{Name: "gone"}}})
	f := newFixture(t, vm)
	f.cache(boundClaim())
	f.run(func(k string) error { return f.c.syncVolumeSnapshotStatuses(t.Context(), k) }, "ns/vm")
	got, _ := f.cs.KubevirtV1().VirtualMachines("ns").Get(t.Context(), "vm", metav1.GetOptions{})
	if got.Status.VolumeSnapshotStatuses != nil {
		t.Fatalf("a VM the VM controller has not synced got volumeSnapshotStatuses %v from the snapshot controller", got.Status.VolumeSnapshotStatuses)
	}

	vm.Status.ObservedGeneration = 1
	f = newFixture(t, vm)
	f.cache(boundClaim())
	f.run(func(k string) error { return f.c.syncVolumeSnapshotStatuses(t.Context(), k) }, "ns/vm")
	got, _ = f.cs.KubevirtV1().VirtualMachines("ns").Get(t.Context(), "vm", metav1.GetOptions{})
	want := []v1.VolumeSnapshotStatus{
		{Name: "containerdisk", Reason: "Snapshot is not supported for this volumeSource type [containerdisk]"},
		{Name: "data", Reason: "No VolumeSnapshotClass: Volume snapshots are not configured for this StorageClass [local-path] [data]"},
		{Name: "gone", Reason: "PVC not found"},
	}
	if diff := cmp.Diff(want, got.Status.VolumeSnapshotStatuses); diff != "" {
		t.Errorf("volumeSnapshotStatuses (-want +got):\n%s", diff)
	}
}

// TestSnapshotOfRunningVM: the snapshot locks the VM, records it, succeeds
// with every volume excluded and the Online indication, and lets go.
func TestSnapshotOfRunningVM(t *testing.T) {
	f := newFixture(t, testVM(v1.RunStrategyAlways), testSnapshot())
	f.cache(boundClaim())
	f.cache(&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}})
	f.run(func(k string) error { return f.c.syncSnapshot(t.Context(), k) }, "ns/snap")
	snap := f.snapshot("snap")
	st := snap.Status
	if st.Phase != snapshotv1.Succeeded || !*st.ReadyToUse || *st.SourceUID != "vm-uid" || *st.VirtualMachineSnapshotContentName != "vmsnapshot-content-snap-uid" {
		t.Fatalf("status: %+v", st)
	}
	if diff := cmp.Diff([]snapshotv1.Indication{"NoGuestAgent", "Online"}, st.Indications); diff != "" {
		t.Errorf("indications (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&snapshotv1.SnapshotVolumesLists{ExcludedVolumes: []string{"containerdisk", "data"}}, st.SnapshotVolumes); diff != "" {
		t.Errorf("snapshotVolumes (-want +got):\n%s", diff)
	}
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, string(c.Type)+"="+string(c.Status)+":"+c.Reason)
	}
	if diff := cmp.Diff([]string{"Progressing=False:Operation complete", "Ready=True:Ready"}, conds); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	content, err := f.cs.SnapshotV1beta1().VirtualMachineSnapshotContents("ns").Get(t.Context(), "vmsnapshot-content-snap-uid", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vm := content.Spec.Source.VirtualMachine; vm == nil || vm.Name != "vm" || vm.Spec.Template.ObjectMeta.Annotations["version"] != "1" ||
		!*content.Status.ReadyToUse || !slices.Contains(content.Finalizers, ContentFinalizer) || *content.Spec.VirtualMachineSnapshotName != "snap" {
		t.Errorf("content: %+v", content)
	}
	vm, _ := f.cs.KubevirtV1().VirtualMachines("ns").Get(t.Context(), "vm", metav1.GetOptions{})
	if vm.Status.SnapshotInProgress != nil || slices.Contains(vm.Finalizers, SourceFinalizer) {
		t.Errorf("the VM is still locked: %v %v", vm.Status.SnapshotInProgress, vm.Finalizers)
	}

	// Deleting the snapshot deletes its content.
	snap.DeletionTimestamp = ptr.To(metav1.NewTime(f.now))
	if _, err := f.cs.SnapshotV1beta1().VirtualMachineSnapshots("ns").Update(t.Context(), snap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.run(func(k string) error { return f.c.syncSnapshot(t.Context(), k) }, "ns/snap")
	if _, err := f.cs.SnapshotV1beta1().VirtualMachineSnapshotContents("ns").Get(t.Context(), "vmsnapshot-content-snap-uid", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the content outlived its snapshot: %v", err)
	}
	if slices.Contains(f.snapshot("snap").Finalizers, SnapshotFinalizer) {
		t.Error("the snapshot's finalizer was kept")
	}
}

// TestSnapshotWaitsAndFails: an unbound claim keeps the source unlocked
// until the deadline fails the snapshot; a missing VM says so.
func TestSnapshotWaitsAndFails(t *testing.T) {
	f := newFixture(t, testVM(v1.RunStrategyHalted), testSnapshot())
	pending := boundClaim()
	pending.Status.Phase = corev1.ClaimPending
	f.cache(pending)
	f.run(func(k string) error { return f.c.syncSnapshot(t.Context(), k) }, "ns/snap")
	st := f.snapshot("snap").Status
	if st.Phase != snapshotv1.InProgress || st.Conditions[0].Reason != "Source not locked source ns/vm volume not bound: data" {
		t.Fatalf("status with an unbound claim: %+v", st)
	}
	f.now = created.Add(snapshotv1.DefaultFailureDeadline)
	f.run(func(k string) error { return f.c.syncSnapshot(t.Context(), k) }, "ns/snap")
	st = f.snapshot("snap").Status
	if st.Phase != snapshotv1.Failed || !hasCondition(st.Conditions, snapshotv1.ConditionFailure) {
		t.Errorf("status past the deadline: %+v", st)
	}

	g := newFixture(t, testSnapshot())
	g.run(func(k string) error { return g.c.syncSnapshot(t.Context(), k) }, "ns/snap")
	if st := g.snapshot("snap").Status; st.Phase != snapshotv1.InProgress || st.Conditions[0].Reason != "Source does not exist" {
		t.Errorf("status without the VM: %+v", st)
	}
}

// TestRestore: a restore of a stopped VM writes the snapshot's template
// (keeping the run strategy); one of a running VM waits; one to a missing
// VM creates it halted, patched.
func TestRestore(t *testing.T) {
	f := newFixture(t, testVM(v1.RunStrategyAlways), testSnapshot())
	f.cache(boundClaim())
	f.run(func(k string) error { return f.c.syncSnapshot(t.Context(), k) }, "ns/snap")
	vm, _ := f.cs.KubevirtV1().VirtualMachines("ns").Get(t.Context(), "vm", metav1.GetOptions{})
	vm.Spec.Template.ObjectMeta.Annotations["version"] = "2"
	vm.Spec.RunStrategy = ptr.To(v1.RunStrategyHalted)
	if _, err := f.cs.KubevirtV1().VirtualMachines("ns").Update(t.Context(), vm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cache(&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}})
	restore := func(name, target string, patches ...string) *snapshotv1.VirtualMachineRestore {
		return &snapshotv1.VirtualMachineRestore{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "r-uid", CreationTimestamp: metav1.NewTime(created)},
			Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: target},
				VirtualMachineSnapshotName: "snap", Patches: patches},
		}
	}
	f.create(restore("r", "vm"))
	f.refresh()
	sync := func(k string) error { return f.c.syncRestore(t.Context(), k) }
	f.run(sync, "ns/r")
	r, _ := f.cs.SnapshotV1beta1().VirtualMachineRestores("ns").Get(t.Context(), "r", metav1.GetOptions{})
	if *r.Status.Complete || r.Status.Conditions[0].Reason != "Waiting for target VM to be powered off. Please stop the restore target to proceed with restore, or the operation will fail after 5m0s" {
		t.Fatalf("restore while the target runs: %+v", r.Status)
	}
	if err := f.idx["vmis"].Delete(&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	f.run(sync, "ns/r")
	r, _ = f.cs.SnapshotV1beta1().VirtualMachineRestores("ns").Get(t.Context(), "r", metav1.GetOptions{})
	vm, _ = f.cs.KubevirtV1().VirtualMachines("ns").Get(t.Context(), "vm", metav1.GetOptions{})
	if !*r.Status.Complete || r.Status.RestoreTime == nil || !slices.Contains(r.Finalizers, RestoreFinalizer) || !metav1.IsControlledBy(r, vm) {
		t.Errorf("restore: %+v", r)
	}
	if vm.Spec.Template.ObjectMeta.Annotations["version"] != "1" || *vm.Spec.RunStrategy != v1.RunStrategyHalted ||
		vm.Annotations[LastRestoreAnnotation] != "r-r-uid" || vm.Status.RestoreInProgress != nil {
		t.Errorf("restored VM: template %v, runStrategy %v, annotations %v, restoreInProgress %v",
			vm.Spec.Template.ObjectMeta.Annotations, *vm.Spec.RunStrategy, vm.Annotations, vm.Status.RestoreInProgress)
	}

	f.create(restore("copy", "vm-copy", `{"op": "replace", "path": "/metadata/name", "value": "vm-copy"}`, `{"op": "add", "path": "/metadata/labels/copy", "value": "yes"}`))
	f.refresh()
	f.run(sync, "ns/copy")
	cp, err := f.cs.KubevirtV1().VirtualMachines("ns").Get(t.Context(), "vm-copy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *cp.Spec.RunStrategy != v1.RunStrategyHalted || cp.Labels["copy"] != "yes" || cp.Labels["app"] != "vm" || cp.Spec.Template.ObjectMeta.Annotations["version"] != "1" {
		t.Errorf("created VM: %+v", cp)
	}
	if r, _ := f.cs.SnapshotV1beta1().VirtualMachineRestores("ns").Get(t.Context(), "copy", metav1.GetOptions{}); r.Status == nil || !*r.Status.Complete {
		t.Errorf("restore to a new VM: %+v", r.Status)
	}
}
