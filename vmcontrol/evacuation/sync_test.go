package evacuation

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

func vmi(name string, edit func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	live := v1.EvictionStrategyLiveMigrate
	v := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec:       v1.VirtualMachineInstanceSpec{EvictionStrategy: &live},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01", ActivePods: map[types.UID]string{"p": "node01"},
			Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}},
	}
	if edit != nil {
		edit(v)
	}
	return v
}

func TestSync(t *testing.T) {
	drained := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: DrainTaintKey, Effect: corev1.TaintEffectNoSchedule}}}}
	plain := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01"}}
	evicted := func(v *v1.VirtualMachineInstance) { v.Status.EvacuationNodeName = "node01" }
	none := v1.EvictionStrategyNone
	ifPossible := v1.EvictionStrategyLiveMigrateIfPossible
	cases := []struct {
		name     string
		node     *corev1.Node
		vmis     []*v1.VirtualMachineInstance
		objs     []runtime.Object
		kubevirt *v1.KubeVirt
		want     []string // VMIs that get a migration
	}{
		{"drained node: every LiveMigrate VMI", drained, []*v1.VirtualMachineInstance{vmi("a", nil), vmi("b", nil)}, nil, nil, []string{"a", "b"}},
		{"plain node: only the evicted", plain, []*v1.VirtualMachineInstance{vmi("a", evicted), vmi("b", nil)}, nil, nil, []string{"a"}},
		{"evicted but already elsewhere", plain, []*v1.VirtualMachineInstance{vmi("a", func(v *v1.VirtualMachineInstance) { v.Status.EvacuationNodeName = "node02" })}, nil, nil, nil},
		{"strategy None", drained, []*v1.VirtualMachineInstance{vmi("a", func(v *v1.VirtualMachineInstance) { v.Spec.EvictionStrategy = &none })}, nil, nil, nil},
		{"no strategy, cluster-wide LiveMigrate", drained, []*v1.VirtualMachineInstance{vmi("a", func(v *v1.VirtualMachineInstance) { v.Spec.EvictionStrategy = nil })}, nil,
			&v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kv", Namespace: "kubevirt"}, Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{EvictionStrategy: ptr(v1.EvictionStrategyLiveMigrate)}}},
			[]string{"a"}},
		{"no strategy anywhere", drained, []*v1.VirtualMachineInstance{vmi("a", func(v *v1.VirtualMachineInstance) { v.Spec.EvictionStrategy = nil })}, nil, nil, nil},
		{"not migratable", drained, []*v1.VirtualMachineInstance{vmi("a", func(v *v1.VirtualMachineInstance) {
			v.Spec.EvictionStrategy = &ifPossible
			v.Status.Conditions[0].Status = corev1.ConditionFalse
		})}, nil, nil, nil},
		{"already migrating", drained, []*v1.VirtualMachineInstance{vmi("a", nil)}, []runtime.Object{&v1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "a"},
			Status: v1.VirtualMachineInstanceMigrationStatus{Phase: v1.MigrationRunning}}}, nil, nil},
		{"a failed migration does not count", drained, []*v1.VirtualMachineInstance{vmi("a", nil)}, []runtime.Object{&v1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "a"},
			Status: v1.VirtualMachineInstanceMigrationStatus{Phase: v1.MigrationFailed}}}, nil, []string{"a"}},
		{"two active pods", drained, []*v1.VirtualMachineInstance{vmi("a", func(v *v1.VirtualMachineInstance) { v.Status.ActivePods["q"] = "node02" })}, nil, nil, nil},
		{"final or deleted", drained, []*v1.VirtualMachineInstance{
			vmi("a", func(v *v1.VirtualMachineInstance) { v.Status.Phase = v1.Succeeded }),
			vmi("b", func(v *v1.VirtualMachineInstance) { v.DeletionTimestamp = &metav1.Time{} }),
		}, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]runtime.Object{}, tc.objs...)
			for _, v := range tc.vmis {
				objs = append(objs, v)
			}
			client := fake.NewSimpleClientset(objs...)
			// The fake does not generate names.
			client.PrependReactor("create", "virtualmachineinstancemigrations", func(a k8stesting.Action) (bool, runtime.Object, error) {
				m := a.(k8stesting.CreateAction).GetObject().(*v1.VirtualMachineInstanceMigration)
				m.Name = m.GenerateName + m.Spec.VMIName
				return false, nil, nil
			})
			f := externalversions.NewSharedInformerFactory(client, 0)
			kf := kubeinformers.NewSharedInformerFactory(kubefake.NewSimpleClientset(), 0)
			vmis, migrations, kubevirts := f.Kubevirt().V1().VirtualMachineInstances().Informer(), f.Kubevirt().V1().VirtualMachineInstanceMigrations().Informer(), f.Kubevirt().V1().KubeVirts().Informer()
			nodes := kf.Core().V1().Nodes().Informer()
			c, err := New(Config{Client: client.KubevirtV1(), Nodes: nodes, VMIs: vmis, Migrations: migrations, KubeVirts: kubevirts})
			if err != nil {
				t.Fatal(err)
			}
			_ = nodes.GetIndexer().Add(tc.node)
			for _, o := range objs {
				switch o := o.(type) {
				case *v1.VirtualMachineInstance:
					_ = vmis.GetIndexer().Add(o)
				case *v1.VirtualMachineInstanceMigration:
					_ = migrations.GetIndexer().Add(o)
				}
			}
			if tc.kubevirt != nil {
				_ = kubevirts.GetIndexer().Add(tc.kubevirt)
			}
			if err := c.sync(context.Background(), "node01"); err != nil {
				t.Fatal(err)
			}
			list, _ := client.KubevirtV1().VirtualMachineInstanceMigrations("ns").List(context.Background(), metav1.ListOptions{})
			var got []string
			for _, m := range list.Items {
				if m.Annotations[MigrationAnnotation] == "node01" {
					got = append(got, m.Spec.VMIName)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("migrated VMIs (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
