package evacuation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/migration"
)

func (c *Controller) sync(ctx context.Context, nodeName string) error {
	node, err := c.nodes.Get(nodeName)
	if apierrors.IsNotFound(err) {
		c.exp.Forget(nodeName)
		return nil
	}
	if err != nil {
		return err
	}
	if !c.exp.Satisfied(nodeName) {
		return nil // our migrations are not in the cache yet
	}
	objs, err := c.vmiIndexer.ByIndex(vmisByNodeIndex, nodeName)
	if err != nil {
		return err
	}
	var vmis []*v1.VirtualMachineInstance
	for _, o := range objs {
		if vmi, ok := o.(*v1.VirtualMachineInstance); ok && vmi.Status.NodeName == nodeName {
			vmis = append(vmis, vmi)
		}
	}
	candidates := c.toMigrate(Drained(node), vmis)
	if len(candidates) == 0 {
		return nil
	}
	slices.SortFunc(candidates, func(a, b *v1.VirtualMachineInstance) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	c.exp.ExpectCreations(nodeName, len(candidates))
	var errs []error
	for _, vmi := range candidates {
		created, err := c.client.VirtualMachineInstanceMigrations(vmi.Namespace).Create(ctx, NewMigration(vmi, nodeName), metav1.CreateOptions{})
		if err != nil {
			c.exp.CreationObserved(nodeName)
			c.recorder.Eventf(vmi, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating a Migration: %v", err)
			errs = append(errs, fmt.Errorf("evacuating VirtualMachineInstance %s/%s from node %s: %w", vmi.Namespace, vmi.Name, nodeName, err))
			continue
		}
		klog.FromContext(ctx).Info("evacuating a VMI", "vmi", vmi.Namespace+"/"+vmi.Name, "node", nodeName, "migration", created.Name)
		c.recorder.Eventf(vmi, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created Migration %s", created.Name)
	}
	return errors.Join(errs...)
}

// NewMigration is the migration evacuating vmi from node (KubeVirt's
// GenerateNewMigration).
func NewMigration(vmi *v1.VirtualMachineInstance, node string) *v1.VirtualMachineInstanceMigration {
	return &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubevirt-evacuation-", Annotations: map[string]string{MigrationAnnotation: node}},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: vmi.Name},
	}
}

// toMigrate picks the VMIs on a node that must leave it and can (KubeVirt's
// vmisToMigrate and filterRunningNonMigratingVMIs).
func (c *Controller) toMigrate(drained bool, vmis []*v1.VirtualMachineInstance) []*v1.VirtualMachineInstance {
	var out []*v1.VirtualMachineInstance
	for _, vmi := range vmis {
		evicted := vmi.Status.EvacuationNodeName != "" && vmi.Status.EvacuationNodeName == vmi.Status.NodeName && !migrating(vmi)
		if !drained && !evicted {
			continue
		}
		if vmi.IsFinal() || vmi.DeletionTimestamp != nil || !migration.MigratableOnEviction(vmi, c.kubevirts) || !migration.IsMigratable(vmi) {
			continue
		}
		if len(vmi.Status.ActivePods) > 1 {
			continue // a previous migration's pods are still going away
		}
		ms, _ := migration.MigrationsOf(c.migrations, vmi.Namespace, vmi.Name)
		if slices.ContainsFunc(ms, func(m *v1.VirtualMachineInstanceMigration) bool { return !m.IsFinal() }) {
			continue // already migrating
		}
		out = append(out, vmi)
	}
	return out
}

// migrating: the VMI's latest migration started and has not ended
// (KubeVirt's IsMigrating).
func migrating(vmi *v1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && ms.StartTimestamp != nil && ms.EndTimestamp == nil
}
