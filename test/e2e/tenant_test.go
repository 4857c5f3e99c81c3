package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

// TestHostileTenant plays the security review's tenant (#35): a user with
// the default edit role in a namespace of their own tries what reached
// other tenants' VMs before, and gets refusals; a VM in another namespace
// runs on untouched.
//
//   - N1: a VMI created with a forged status.migrationState, or with a
//     reserved kubevirt.io/ label, is refused by the API server; so is a
//     later change of its status or of those labels.
//   - N2: port-forward to the tenant's own VM without a pod network (whose
//     status a guest agent or a forged write could fill) is refused.
//   - RBAC: the victim's VMI, console and port-forward are forbidden.
func TestHostileTenant(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()

	// The victim: a running VM in namespace default.
	victim := framework.ExampleVM(t, "vm-tiny.yaml", "victim", v1.RunStrategyAlways)
	framework.CreateVM(t, c, victim)
	before := framework.WaitVMI(t, c, "victim", "Running", running)

	// The tenant: user e2e-tenant, edit in namespace e2e-tenant.
	const ns, user = "e2e-tenant", "e2e-tenant"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantConfig := impersonate(c, user)
	tenant, err := versioned.NewForConfig(tenantConfig)
	if err != nil {
		t.Fatal(err)
	}
	tenantVMIs := tenant.KubevirtV1().VirtualMachineInstances(ns)
	newVMI := func(name string) *v1.VirtualMachineInstance {
		tmpl := framework.ExampleVM(t, "vm-tiny.yaml", name, "").Spec.Template
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tmpl.ObjectMeta.Labels}, Spec: tmpl.Spec}
	}
	refused := func(what string, err error, field string) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s: accepted", what)
		case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
			t.Errorf("%s: %v, want Forbidden or Invalid", what, err)
		case !strings.Contains(err.Error(), field):
			t.Errorf("%s: %v, want the message to name %s", what, err, field)
		default:
			t.Logf("%s: refused: %v", what, err)
		}
	}

	// N1: status and reserved labels at creation.
	forged := newVMI("forged")
	forged.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: before.Status.NodeName,
		MigrationState: &v1.VirtualMachineInstanceMigrationState{
			MigrationUID: types.UID("forged"), SourceNode: before.Status.NodeName, TargetNode: before.Status.NodeName,
			TargetNodeAddress: "10.96.0.1", TargetDirectMigrationNodePorts: map[string]int{"8186": 0},
		}}
	_, err = tenantVMIs.Create(ctx, forged, metav1.CreateOptions{})
	refused("creating a VMI with a status", err, "status")
	labelled := newVMI("labelled")
	labelled.Labels = map[string]string{v1.NodeNameLabel: before.Status.NodeName}
	_, err = tenantVMIs.Create(ctx, labelled, metav1.CreateOptions{})
	refused("creating a VMI labelled "+v1.NodeNameLabel, err, v1.NodeNameLabel)

	// The tenant's own VMI, as KubeVirt's manifests create one (status: {}).
	if _, err := tenantVMIs.Create(ctx, newVMI("own"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the tenant's own VMI: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Client.KubevirtV1().VirtualMachineInstances(ns).Delete(context.Background(), "own", metav1.DeleteOptions{})
	})
	framework.WaitFor(t, c, "the tenant's VMI Running", 3*time.Minute, func() (bool, string) {
		v, err := tenantVMIs.Get(ctx, "own", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return running(v), fmt.Sprintf("phase %s", v.Status.Phase)
	})
	// N1 after creation: status and reserved labels stay the components'.
	// update applies mutate to the VMI as it is now, again while the
	// components' own writes make it a conflict.
	update := func(mutate func(*v1.VirtualMachineInstance)) error {
		for {
			cur, err := tenantVMIs.Get(ctx, "own", metav1.GetOptions{})
			if err != nil {
				return err
			}
			mutate(cur)
			if _, err = tenantVMIs.Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	refused("writing a migration into the VMI's status", update(func(v *v1.VirtualMachineInstance) {
		v.Status.MigrationState = forged.Status.MigrationState
	}), "status")
	refused("changing the VMI's "+v1.NodeNameLabel+" label", update(func(v *v1.VirtualMachineInstance) {
		v.Labels[v1.NodeNameLabel] = "elsewhere"
	}), v1.NodeNameLabel)

	// N2: no pod network, so no address the node agent wired: nothing to
	// forward to (the agent never dials status.interfaces).
	sub, err := vmctl.NewSubresources(tenantConfig)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := sub.Stream(ctx, ns, "own", vmctl.PortForwardPath(8186, "tcp")); err == nil {
		conn.Close()
		t.Error("port-forward to a VMI without a pod network was accepted")
	} else if !strings.Contains(err.Error(), "no pod network address") {
		t.Errorf("port-forward to the tenant's VMI without a pod network: %v, want the agent's refusal", err)
	}

	// The victim's namespace is not the tenant's.
	if _, err := tenant.KubevirtV1().VirtualMachineInstances("default").Get(ctx, "victim", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading the victim's VMI: %v, want Forbidden", err)
	}
	for _, s := range []string{"console", vmctl.PortForwardPath(22, "tcp")} {
		if conn, err := sub.Stream(ctx, "default", "victim", s); err == nil {
			conn.Close()
			t.Errorf("the tenant opened the victim's %s", s)
		} else if !strings.Contains(err.Error(), "forbidden") && !strings.Contains(err.Error(), "403") {
			t.Errorf("the victim's %s: %v, want forbidden", s, err)
		}
	}

	// The victim runs on, untouched.
	after, err := c.Client.KubevirtV1().VirtualMachineInstances("default").Get(ctx, "victim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || !running(after) || after.Status.MigrationState != nil || after.Status.EvacuationNodeName != "" {
		t.Errorf("the victim changed: uid %s→%s, phase %s, migration %+v, evacuation %q", before.UID, after.UID, after.Status.Phase, after.Status.MigrationState, after.Status.EvacuationNodeName)
	}
}
