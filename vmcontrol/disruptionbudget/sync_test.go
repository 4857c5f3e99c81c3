package disruptionbudget

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	"github.com/vmkit/vmkit/vmapi/generated/informers/externalversions"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/kubeclient"
)

func vmi(edit func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	live := v1.EvictionStrategyLiveMigrate
	v := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "a-uid"},
		Spec:       v1.VirtualMachineInstanceSpec{EvictionStrategy: &live},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node01",
			Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}},
	}
	if edit != nil {
		edit(v)
	}
	return v
}

// budget is a budget of VMI a (uid is its controller's UID) created at
// second sec.
func budget(name string, uid types.UID, min int32, migration string, sec int) *policyv1.PodDisruptionBudget {
	owner := vmi(func(v *v1.VirtualMachineInstance) { v.UID = uid })
	pdb := NewBudget(owner)
	pdb.Name, pdb.GenerateName, pdb.UID = name, "", types.UID(name+"-uid")
	pdb.CreationTimestamp = metav1.NewTime(time.Unix(int64(sec), 0))
	m := intstr.FromInt32(min)
	pdb.Spec.MinAvailable = &m
	if migration != "" {
		pdb.Labels = map[string]string{MigrationNameLabel: migration}
	}
	return pdb
}

func mig(name string, phase v1.VirtualMachineInstanceMigrationPhase) *v1.VirtualMachineInstanceMigration {
	return &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "a"}, Status: v1.VirtualMachineInstanceMigrationStatus{Phase: phase}}
}

func pod(name string, phase corev1.PodPhase) *corev1.Pod {
	owner := vmi(nil)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{v1.CreatedByLabel: "a-uid"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1.VirtualMachineInstanceGroupVersionKind)}},
		Status: corev1.PodStatus{Phase: phase}}
}

func ptr[T any](v T) *T { return &v }

func TestSync(t *testing.T) {
	none := v1.EvictionStrategyNone
	ifPossible := v1.EvictionStrategyLiveMigrateIfPossible
	noStrategy := func(v *v1.VirtualMachineInstance) { v.Spec.EvictionStrategy = nil }
	clusterLive := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kv", Namespace: "kubevirt"},
		Spec: v1.KubeVirtSpec{Configuration: v1.KubeVirtConfiguration{EvictionStrategy: ptr(v1.EvictionStrategyLiveMigrate)}}}
	cases := []struct {
		name       string
		vmi        *v1.VirtualMachineInstance // nil: the VMI is gone
		budgets    []*policyv1.PodDisruptionBudget
		migrations []*v1.VirtualMachineInstanceMigration
		pods       []*corev1.Pod
		kubevirt   *v1.KubeVirt
		want       []string // budgets after the sync: name min label
		writes     []string // verb of each write
	}{
		{name: "LiveMigrate VMI gets a budget", vmi: vmi(nil),
			want: []string{"kubevirt-disruption-budget-a 1 "}, writes: []string{"create"}},
		{name: "a Pending VMI too", vmi: vmi(func(v *v1.VirtualMachineInstance) { v.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Pending} }),
			want: []string{"kubevirt-disruption-budget-a 1 "}, writes: []string{"create"}},
		{name: "no strategy: none", vmi: vmi(noStrategy)},
		{name: "strategy None: none", vmi: vmi(func(v *v1.VirtualMachineInstance) { v.Spec.EvictionStrategy = &none })},
		{name: "cluster-wide LiveMigrate", vmi: vmi(noStrategy), kubevirt: clusterLive,
			want: []string{"kubevirt-disruption-budget-a 1 "}, writes: []string{"create"}},
		{name: "the VMI's own strategy wins over the cluster's", vmi: vmi(func(v *v1.VirtualMachineInstance) { v.Spec.EvictionStrategy = &none }), kubevirt: clusterLive},
		{name: "LiveMigrateIfPossible and migratable", vmi: vmi(func(v *v1.VirtualMachineInstance) { v.Spec.EvictionStrategy = &ifPossible }),
			want: []string{"kubevirt-disruption-budget-a 1 "}, writes: []string{"create"}},
		{name: "LiveMigrateIfPossible, not migratable: deleted", vmi: vmi(func(v *v1.VirtualMachineInstance) {
			v.Spec.EvictionStrategy = &ifPossible
			v.Status.Conditions[0].Status = corev1.ConditionFalse
		}), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 1, "", 1)}, writes: []string{"delete"}},
		{name: "in place: no write", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 1, "", 1)},
			migrations: []*v1.VirtualMachineInstanceMigration{mig("old", v1.MigrationSucceeded)},
			want:       []string{"b 1 "}},
		{name: "a running migration raises it", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 1, "", 1)},
			migrations: []*v1.VirtualMachineInstanceMigration{mig("m", v1.MigrationRunning)},
			want:       []string{"b 2 m"}, writes: []string{"patch"}},
		{name: "a pending one too", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 1, "", 1)},
			migrations: []*v1.VirtualMachineInstanceMigration{mig("m", v1.MigrationPending)},
			want:       []string{"b 2 m"}, writes: []string{"patch"}},
		{name: "raised: no write", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 2, "m", 1)},
			migrations: []*v1.VirtualMachineInstanceMigration{mig("m", v1.MigrationRunning)},
			want:       []string{"b 2 m"}},
		{name: "succeeded, one pod left: lowered", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 2, "m", 1)},
			migrations: []*v1.VirtualMachineInstanceMigration{mig("m", v1.MigrationSucceeded)},
			pods:       []*corev1.Pod{pod("source", corev1.PodSucceeded), pod("target", corev1.PodRunning)},
			want:       []string{"b 1 "}, writes: []string{"patch"}},
		{name: "succeeded, the source still running: kept", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 2, "m", 1)},
			migrations: []*v1.VirtualMachineInstanceMigration{mig("m", v1.MigrationSucceeded)},
			pods:       []*corev1.Pod{pod("source", corev1.PodRunning), pod("target", corev1.PodRunning)},
			want:       []string{"b 2 m"}},
		{name: "failed and deleted migration: lowered", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 2, "m", 1)},
			pods: []*corev1.Pod{pod("source", corev1.PodRunning), pod("target", corev1.PodFailed)},
			want: []string{"b 1 "}, writes: []string{"patch"}},
		{name: "a new migration takes the label over", vmi: vmi(nil), budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 2, "m", 1)},
			migrations: []*v1.VirtualMachineInstanceMigration{mig("m", v1.MigrationFailed), mig("n", v1.MigrationScheduling)},
			want:       []string{"b 2 n"}, writes: []string{"patch"}},
		{name: "final VMI: deleted", vmi: vmi(func(v *v1.VirtualMachineInstance) { v.Status.Phase = v1.Succeeded }),
			budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 1, "", 1)}, writes: []string{"delete"}},
		{name: "VMI being deleted: deleted", vmi: vmi(func(v *v1.VirtualMachineInstance) { v.DeletionTimestamp = &metav1.Time{} }),
			budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 1, "", 1)}, writes: []string{"delete"}},
		{name: "VMI gone: deleted", budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 1, "", 1)}, writes: []string{"delete"}},
		{name: "strategy dropped: deleted", vmi: vmi(noStrategy),
			budgets: []*policyv1.PodDisruptionBudget{budget("b", "a-uid", 2, "m", 1)}, writes: []string{"delete"}},
		{name: "an earlier VMI's budget: deleted first", vmi: vmi(nil),
			budgets: []*policyv1.PodDisruptionBudget{budget("b", "old-uid", 1, "", 1)}, writes: []string{"delete"}},
		{name: "a duplicate: the newer deleted", vmi: vmi(nil),
			budgets: []*policyv1.PodDisruptionBudget{budget("c", "a-uid", 1, "", 2), budget("b", "a-uid", 1, "", 1)},
			want:    []string{"b 1 "}, writes: []string{"delete"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var kubeObjs, kvObjs []runtime.Object
			for _, b := range tc.budgets {
				kubeObjs = append(kubeObjs, b)
			}
			for _, p := range tc.pods {
				kubeObjs = append(kubeObjs, p)
			}
			if tc.vmi != nil {
				kvObjs = append(kvObjs, tc.vmi)
			}
			kube := kubefake.NewClientset(kubeObjs...)
			// The fake does not generate names.
			kube.PrependReactor("create", "poddisruptionbudgets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				pdb := a.(k8stesting.CreateAction).GetObject().(*policyv1.PodDisruptionBudget)
				pdb.Name = pdb.GenerateName + pdb.OwnerReferences[0].Name
				return false, nil, nil
			})
			f := externalversions.NewSharedInformerFactory(fake.NewSimpleClientset(kvObjs...), 0)
			kf := kubeinformers.NewSharedInformerFactory(kube, 0)
			vmis, migrations, kubevirts := f.Kubevirt().V1().VirtualMachineInstances().Informer(), f.Kubevirt().V1().VirtualMachineInstanceMigrations().Informer(), f.Kubevirt().V1().KubeVirts().Informer()
			budgets, pods := kf.Policy().V1().PodDisruptionBudgets().Informer(), kf.Core().V1().Pods().Informer()
			c, err := New(Config{
				Client: kubeclient.PodDisruptionBudgetsGetterFunc(func(ns string) kubeclient.PodDisruptionBudgetInterface {
					return kube.PolicyV1().PodDisruptionBudgets(ns)
				}),
				VMIs: vmis, Budgets: budgets, Pods: pods, Migrations: migrations, KubeVirts: kubevirts,
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.vmi != nil {
				_ = vmis.GetIndexer().Add(tc.vmi)
			}
			for _, b := range tc.budgets {
				_ = budgets.GetIndexer().Add(b)
			}
			for _, p := range tc.pods {
				_ = pods.GetIndexer().Add(p)
			}
			for _, m := range tc.migrations {
				_ = migrations.GetIndexer().Add(m)
			}
			if tc.kubevirt != nil {
				_ = kubevirts.GetIndexer().Add(tc.kubevirt)
			}
			kube.ClearActions()
			if err := c.sync(context.Background(), "ns/a"); err != nil {
				t.Fatal(err)
			}
			var writes []string
			for _, a := range kube.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
					writes = append(writes, a.GetVerb())
				}
			}
			if diff := cmp.Diff(tc.writes, writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			list, _ := kube.PolicyV1().PodDisruptionBudgets("ns").List(context.Background(), metav1.ListOptions{})
			var got []string
			for _, b := range list.Items {
				got = append(got, fmt.Sprintf("%s %d %s", b.Name, b.Spec.MinAvailable.IntValue(), b.Labels[MigrationNameLabel]))
				if b.Spec.Selector.MatchLabels[v1.CreatedByLabel] != "a-uid" && b.OwnerReferences[0].UID == "a-uid" {
					t.Errorf("budget %s selects %v, want %s=a-uid", b.Name, b.Spec.Selector.MatchLabels, v1.CreatedByLabel)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("budgets (-want +got):\n%s", diff)
			}
		})
	}
}

// A create or delete the cache has not shown yet holds the next sync back.
func TestExpectations(t *testing.T) {
	kube := kubefake.NewClientset()
	f := externalversions.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	kf := kubeinformers.NewSharedInformerFactory(kube, 0)
	vmis := f.Kubevirt().V1().VirtualMachineInstances().Informer()
	c, err := New(Config{
		Client: kubeclient.PodDisruptionBudgetsGetterFunc(func(ns string) kubeclient.PodDisruptionBudgetInterface {
			return kube.PolicyV1().PodDisruptionBudgets(ns)
		}),
		VMIs: vmis, Budgets: kf.Policy().V1().PodDisruptionBudgets().Informer(), Pods: kf.Core().V1().Pods().Informer(),
		Migrations: f.Kubevirt().V1().VirtualMachineInstanceMigrations().Informer(),
	})
	if err != nil {
		t.Fatal(err)
	}
	kube.PrependReactor("create", "poddisruptionbudgets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pdb := a.(k8stesting.CreateAction).GetObject().(*policyv1.PodDisruptionBudget)
		pdb.Name = pdb.GenerateName + "x"
		return false, nil, nil
	})
	_ = vmis.GetIndexer().Add(vmi(nil))
	for range 2 {
		if err := c.sync(context.Background(), "ns/a"); err != nil {
			t.Fatal(err)
		}
	}
	creates := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("%d creates before the cache showed the first, want 1", creates)
	}
}
