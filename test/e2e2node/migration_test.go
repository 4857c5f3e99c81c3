package e2e2node

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl"
)

// downtimeRE finds the downtimes the source agent logs for each migration.
var downtimeRE = regexp.MustCompile(`downtime="[0-9.]+m?s"`)

// TestLiveMigration: examples/vm-net.yaml's guest, with an empty disk,
// not pinned to a node. A migration slowed to 1 MiB/s (the KubeVirt CR's
// bandwidthPerMigration) is deleted while it runs: it is canceled and the
// guest stays on its node, answering HTTP. Then a migration moves it to the
// other node: Succeeded, the same VMI UID, nodeName and the kubevirt.io/nodeName
// label of the other node, the guest answers on its new pod's IP, and what
// it wrote on its empty disk before is still there (the same guest: a new
// one would have a new, empty disk), its console shows no new boot.
// Four more migrations back and forth keep the same guest (their times and
// the downtimes the agents logged are reported), and a migration of a VMI
// whose bridge binding cannot move fails with the reason in its events.
func TestLiveMigration(t *testing.T) {
	c := suite.Need(t)
	ctx := t.Context()
	vm := netVM(t, "vm-mig", c.Env.Nodes[0].Name)
	vm.Spec.Template.Spec.NodeSelector = nil // it must be free to move
	vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks,
		v1.Disk{Name: "scratch", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: "virtio"}}})
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes,
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("16Mi")}}})
	framework.CreateVM(t, c, vm)
	vmi := framework.WaitVMI(t, c, vm.Name, "Running with an IP", func(vmi *v1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
	})
	uid, source := vmi.UID, vmi.Status.NodeName
	ip := vmi.Status.Interfaces[0].IP
	suite.HTTPGetUntil(t, guestURL(ip, "/"), "vmkit guest "+vm.Name, 90*time.Second)
	marker := fmt.Sprintf("written-before-migration-%d", time.Now().UnixNano())
	suite.HTTPGetUntil(t, guestURL(ip, "/cgi-bin/disk?vda="+marker), "wrote "+marker, 30*time.Second)
	suite.HTTPGetUntil(t, guestURL(ip, "/cgi-bin/disk?vda"), marker, 30*time.Second)
	migrations := c.Client.KubevirtV1().VirtualMachineInstanceMigrations("default")

	setBandwidth := func(q string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			kv, err := c.Client.KubevirtV1().KubeVirts(cluster.Namespace).Get(ctx, cluster.KubeVirtName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if kv.Spec.Configuration.MigrationConfiguration == nil {
				kv.Spec.Configuration.MigrationConfiguration = &v1.MigrationConfiguration{}
			}
			if q == "" {
				kv.Spec.Configuration.MigrationConfiguration.BandwidthPerMigration = nil
			} else {
				b := resource.MustParse(q)
				kv.Spec.Configuration.MigrationConfiguration.BandwidthPerMigration = &b
			}
			_, err = c.Client.KubevirtV1().KubeVirts(cluster.Namespace).Update(ctx, kv, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("DeletingAMigrationCancelsIt", func(t *testing.T) {
		setBandwidth("1Mi")
		defer setBandwidth("")
		mig, err := migrations.Create(ctx, &v1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Name: "mig-cancel"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vm.Name},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		suite.WaitFor(t, "migration mig-cancel Running", 3*time.Minute, func() (bool, string) {
			m, err := migrations.Get(ctx, mig.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return m.Status.Phase == v1.MigrationRunning, string(m.Status.Phase)
		})
		if err := migrations.Delete(ctx, mig.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		v := framework.WaitVMI(t, c, vm.Name, "migration canceled", func(v *v1.VirtualMachineInstance) bool {
			ms := v.Status.MigrationState
			return ms != nil && ms.AbortRequested && ms.Failed && ms.EndTimestamp != nil
		})
		if v.Status.NodeName != source || v.Labels[v1.NodeNameLabel] != source || v.Status.Phase != v1.Running {
			t.Errorf("after the cancel: node %s, label %s, phase %s; want Running on %s", v.Status.NodeName, v.Labels[v1.NodeNameLabel], v.Status.Phase, source)
		}
		suite.WaitFor(t, "migration mig-cancel gone", 2*time.Minute, func() (bool, string) {
			_, err := migrations.Get(ctx, mig.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		suite.HTTPGetUntil(t, guestURL(ip, "/cgi-bin/disk?vda"), marker, 30*time.Second)
	})

	t.Run("MigrationMovesTheGuest", func(t *testing.T) {
		began := time.Now()
		migrate(t, c, "mig-1", vm.Name, true)
		took := time.Since(began)
		v := framework.WaitVMI(t, c, vm.Name, "on the other node", func(v *v1.VirtualMachineInstance) bool {
			return v.Status.NodeName != source && v.Status.Phase == v1.Running
		})
		if v.UID != uid || v.Labels[v1.NodeNameLabel] != v.Status.NodeName {
			t.Errorf("after the migration: UID %s (was %s), node %s, label %s", v.UID, uid, v.Status.NodeName, v.Labels[v1.NodeNameLabel])
		}
		ms := v.Status.MigrationState
		if ms == nil || !ms.Completed || ms.Failed || ms.TargetNode != v.Status.NodeName || ms.SourceNode != source {
			t.Errorf("migration state = %+v", ms)
		}
		target := v.Status.NodeName
		// The source launcher pod completes once the guest has left.
		suite.WaitFor(t, "the source launcher pod Succeeded", 60*time.Second, func() (bool, string) {
			pods, err := c.Env.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(uid)})
			if err != nil {
				return false, err.Error()
			}
			var phases []string
			done := true
			for _, p := range pods.Items {
				if p.Spec.NodeName == source {
					phases = append(phases, p.Name+" "+string(p.Status.Phase))
					done = done && p.Status.Phase == corev1.PodSucceeded
				}
			}
			return done, strings.Join(phases, ", ")
		})
		v = framework.WaitVMI(t, c, vm.Name, "with its new pod's IP", func(v *v1.VirtualMachineInstance) bool {
			return len(v.Status.Interfaces) > 0 && v.Status.Interfaces[0].IP != "" && v.Status.Interfaces[0].IP != ip
		})
		newIP := v.Status.Interfaces[0].IP
		got := suite.HTTPGetUntil(t, guestURL(newIP, "/cgi-bin/disk?vda"), marker, 90*time.Second)
		t.Logf("migrated %s -> %s in %v (migration created -> Succeeded); the guest answers at %s with %q", source, target, took, newIP, strings.TrimSpace(got))
		// IPv6 too, at once: the guest's router (the masquerade bridge's
		// static MAC and link-local address) is the same in the new pod,
		// so its answers need no new router advertisement (one comes
		// every 3 minutes).
		if ips := v.Status.Interfaces[0].IPs; len(ips) != 2 {
			t.Errorf("after the migration, status.interfaces[0].ipAddresses = %v, want the new pod's IPv4 and IPv6", ips)
		} else {
			suite.HTTPGetUntil(t, guestURL(ips[1], "/"), "vmkit guest "+vm.Name, 30*time.Second)
		}
		// The target's console holds what the guest printed since it
		// arrived: a guest that booted again would have printed the marker.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lines, err := c.Console(cctx, "default", vm.Name, guestMarker)
		cancel()
		if err == nil {
			t.Errorf("the guest booted again on %s: %q", target, lines)
		}
	})

	t.Run("BackAndForth", func(t *testing.T) {
		// Four more migrations, back and forth: each one's time from the
		// migration's creation to Succeeded, and the downtime (the guest
		// paused at the switch-over) the source agent logged.
		var took []time.Duration
		lastIP := ""
		for i := range 4 {
			// Each migration moves the guest to a new pod on the other
			// node's pod network: its IP changes.
			before := framework.WaitVMI(t, c, vm.Name, "Running with an IP", func(v *v1.VirtualMachineInstance) bool {
				return v.Status.Phase == v1.Running && len(v.Status.Interfaces) > 0 && v.Status.Interfaces[0].IP != "" && v.Status.Interfaces[0].IP != lastIP
			})
			lastIP = before.Status.Interfaces[0].IP
			began := time.Now()
			name := fmt.Sprintf("mig-again-%d", i)
			if i == 0 {
				// The first one as `vmctl migrate` (virtctl migrate) asks
				// for it: the VM's migrate subresource on virt-api, which
				// creates the migration.
				name = migrateThroughVirtAPI(t, c, vm.Name)
			}
			migrate(t, c, name, vm.Name, i > 0)
			took = append(took, time.Since(began))
		}
		v := framework.WaitVMI(t, c, vm.Name, "Running with its new pod's IP", func(v *v1.VirtualMachineInstance) bool {
			return v.Status.Phase == v1.Running && len(v.Status.Interfaces) > 0 && v.Status.Interfaces[0].IP != "" && v.Status.Interfaces[0].IP != lastIP
		})
		if v.UID != uid {
			t.Errorf("after five migrations the VMI has UID %s, was %s", v.UID, uid)
		}
		suite.HTTPGetUntil(t, guestURL(v.Status.Interfaces[0].IP, "/cgi-bin/disk?vda"), marker, 90*time.Second)
		logs := c.PodLogs(ctx, cluster.Namespace, "kubevirt.io=virt-handler", 200)
		t.Logf("migrations created -> Succeeded: %v; downtimes the agents logged: %v", took, downtimeRE.FindAllString(logs, -1))
	})

	t.Run("NotMigratable", func(t *testing.T) {
		// The bridge binding on the pod network cannot move (the guest has
		// the pod's IP): the migration fails, saying why.
		br := netVM(t, "vm-bridge", source)
		br.Spec.Template.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
		framework.CreateVM(t, c, br)
		framework.WaitVMI(t, c, br.Name, "LiveMigratable=False", func(v *v1.VirtualMachineInstance) bool {
			cond := v.VMICondition(v1.VirtualMachineInstanceIsMigratable)
			return v.Status.Phase == v1.Running && cond != nil && cond.Status == corev1.ConditionFalse
		})
		if _, err := migrations.Create(ctx, &v1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Name: "mig-bridge"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: br.Name},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		suite.WaitFor(t, "migration mig-bridge Failed with the reason", 2*time.Minute, func() (bool, string) {
			m, err := migrations.Get(ctx, "mig-bridge", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			evs, err := c.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=mig-bridge"})
			if err != nil {
				return false, err.Error()
			}
			var msgs []string
			for _, e := range evs.Items {
				msgs = append(msgs, e.Message)
			}
			why := strings.Join(msgs, "; ")
			return m.Status.Phase == v1.MigrationFailed && strings.Contains(why, "InterfaceNotLiveMigratable"), string(m.Status.Phase) + ": " + why
		})
		if v := framework.WaitVMI(t, c, br.Name, "Running", func(v *v1.VirtualMachineInstance) bool { return v.Status.Phase == v1.Running }); v.Status.NodeName != source {
			t.Errorf("the VMI that cannot migrate is on %s, was on %s", v.Status.NodeName, source)
		}
	})
}

// migrateThroughVirtAPI migrates VM name as `vmctl migrate` does (PUT
// virtualmachines/<name>/migrate on virt-api) and returns the name of the
// VirtualMachineInstanceMigration virt-api created for it.
func migrateThroughVirtAPI(t *testing.T, c *cluster.Cluster, name string) string {
	t.Helper()
	ctx := t.Context()
	migrations := c.Client.KubevirtV1().VirtualMachineInstanceMigrations("default")
	seen := map[string]bool{}
	list, err := migrations.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		seen[m.Name] = true
	}
	sub, err := vmctl.NewSubresources(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Migrate(ctx, "default", name, v1.MigrateOptions{}); err != nil {
		t.Fatalf("vmctl migrate %s: %v", name, err)
	}
	var created string
	suite.WaitFor(t, "the migration virt-api created for VM "+name, 30*time.Second, func() (bool, string) {
		list, err := migrations.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, m := range list.Items {
			if !seen[m.Name] && m.Spec.VMIName == name {
				created = m.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d migrations, none new for %s", len(list.Items), name)
	})
	return created
}
