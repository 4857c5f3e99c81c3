// Package e2e2node runs vmkit end to end on a real two-node cluster of this
// machine (internal/cluster with Options.Nodes 2): Node localhost in the
// host's mount namespace and Node localhost-2 with its own containerd,
// kubelet, cgroup root, ports, pod network (10.244.1.0/24 on bridge
// vmkit-cni1) and directories in a mount namespace of its own
// (docs/cluster.md). What needs two nodes (live migration, evacuation)
// is tested here; everything else is in test/e2e, on one node.
//
// One cluster serves the whole package (TestMain). After the tests it is
// stopped and TestMain checks that nothing of it is left: no process of its
// run directory, bridge, cgroup, mount or loop device.
package e2e2node

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/internal/cluster"
	"github.com/vmkit/vmkit/internal/framework"
	"github.com/vmkit/vmkit/internal/testenv"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const (
	guestMarker = "GUEST-BOOTED"
	nodes       = 2
)

// suite is the package's cluster, which TestMain starts.
var suite framework.Suite

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	code := func() (code int) {
		o := cluster.Options{Nodes: nodes}
		opts, err := cluster.NodeOptions(o)
		if err != nil {
			suite.Set(nil, err)
			return m.Run()
		}
		// Launch may first wait (up to 15 minutes) for another test's
		// cluster to stop; the install gets its own 5 minutes.
		launchCtx, cancelLaunch := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancelLaunch()
		began := time.Now()
		env, err := testenv.Launch(launchCtx, opts)
		if err != nil {
			suite.Set(nil, fmt.Errorf("starting the cluster: %w", err))
			return m.Run()
		}
		fmt.Printf("e2e2node: control plane and %d nodes ready %v after the test began (waiting for the node lock included)\n", nodes, time.Since(began).Round(time.Millisecond))
		defer func() {
			if err := stopAndCheck(env); err != nil {
				fmt.Fprintln(os.Stderr, "e2e2node: stopping the cluster:", err)
				code = 1
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c, err := cluster.New(env, o)
		if err == nil {
			began := time.Now()
			if err = c.Install(ctx, cluster.StorageOptions{}); err == nil {
				fmt.Printf("e2e2node: vmkit installed by the operator, both nodes schedulable in %v\n", time.Since(began).Round(time.Millisecond))
			}
		}
		suite.Set(c, err)
		return m.Run()
	}()
	os.Exit(code)
}

// stopAndCheck stops the cluster (Stop fails naming what the nodes left
// on the host: bridges, cgroups, mounts, network namespaces, processes,
// loop devices) and reports what else of it is left.
func stopAndCheck(env *testenv.Env) error {
	began := time.Now()
	if err := env.Stop(); err != nil {
		return err
	}
	fmt.Printf("e2e2node: cluster stopped in %v\n", time.Since(began).Round(time.Millisecond))
	var left []string
	if _, err := os.Stat(env.Dir); err == nil {
		left = append(left, "run directory "+env.Dir)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, _ := os.ReadFile(p)
		if strings.Contains(string(cmdline), env.Dir) {
			left = append(left, "process "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, env.Dir) {
			left = append(left, "mount "+l)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// netVM reads examples/vm-net.yaml (the tiny guest, masquerade on the pod
// network, answering HTTP) as VM name pinned to node.
func netVM(t testing.TB, name, node string) *v1.VirtualMachine {
	t.Helper()
	vm := framework.ExampleVM(t, "vm-net.yaml", name, "")
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	return vm
}

// migrate creates the VirtualMachineInstanceMigration name of VMI vmi in
// default, unless create is false (virt-api created it), and waits up to 4
// minutes for it to succeed; a failed migration fails the test with its
// state.
func migrate(t *testing.T, c *cluster.Cluster, name, vmi string, create bool) {
	t.Helper()
	migrations := c.Client.KubevirtV1().VirtualMachineInstanceMigrations("default")
	if create {
		if _, err := migrations.Create(t.Context(), &v1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vmi},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	suite.WaitFor(t, "migration "+name+" Succeeded", 4*time.Minute, func() (bool, string) {
		m, err := migrations.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if m.Status.Phase == v1.MigrationFailed {
			t.Fatalf("migration %s failed: %+v", name, m.Status.MigrationState)
		}
		return m.Status.Phase == v1.MigrationSucceeded, string(m.Status.Phase)
	})
}

// guestURL is the URL of path on the HTTP server of a vm-net.yaml guest.
func guestURL(ip string, path string) string { return framework.GuestURL(ip, 80, path) }

// TestNodes: both Nodes are Ready, each at its own address (its pod
// gateway) and kubelet port, labeled schedulable with a heartbeat by the
// virt-handler running on it; kube-apiserver reaches each kubelet (the
// logs of each node's virt-handler); each node has its own block volumes.
func TestNodes(t *testing.T) {
	c := suite.Need(t)
	for i, n := range c.Env.Nodes {
		node, err := c.Kube.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Name != testenv.NodeNameAt(i) {
			t.Errorf("node %d is %s, want %s", i, n.Name, testenv.NodeNameAt(i))
		}
		var internalIP string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internalIP = a.Address
			}
		}
		if wantPort := int32(10250 + 10*i); internalIP != n.PodGateway || node.Status.DaemonEndpoints.KubeletEndpoint.Port != wantPort {
			t.Errorf("Node %s: InternalIP %s, kubelet port %d; want its pod gateway %s and port %d", n.Name, internalIP,
				node.Status.DaemonEndpoints.KubeletEndpoint.Port, n.PodGateway, wantPort)
		}
		if node.Labels[v1.NodeSchedulable] != "true" || node.Annotations[v1.VirtHandlerHeartbeat] == "" {
			t.Errorf("Node %s: %s=%q, heartbeat %q", n.Name, v1.NodeSchedulable, node.Labels[v1.NodeSchedulable], node.Annotations[v1.VirtHandlerHeartbeat])
		}
		handlers, err := c.Kube.CoreV1().Pods(cluster.Namespace).List(t.Context(), metav1.ListOptions{
			LabelSelector: v1.AppLabel + "=" + v1.VirtHandlerValue, FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			t.Fatal(err)
		}
		if len(handlers.Items) != 1 {
			t.Fatalf("%d virt-handler pods on %s, want 1", len(handlers.Items), n.Name)
		}
		h := handlers.Items[0]
		_, podNet, _ := net.ParseCIDR(n.PodCIDR)
		if !podNet.Contains(net.ParseIP(h.Status.PodIP)) {
			t.Errorf("virt-handler %s on %s has IP %s, not in the node's pod network %s", h.Name, n.Name, h.Status.PodIP, n.PodCIDR)
		}
		logs, err := c.Kube.CoreV1().Pods(cluster.Namespace).GetLogs(h.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
		if err != nil || len(logs) == 0 {
			t.Errorf("logs of virt-handler %s through the kubelet of %s: %v (%d bytes)", h.Name, n.Name, err, len(logs))
		}
		// The node agent's host paths are its node's: its pod directory
		// is in the node's kubelet directory, not in any other node's.
		if _, err := os.Stat(n.HostPath(filepath.Join(testenv.KubeletRootDir, "pods", string(h.UID)))); err != nil {
			t.Errorf("virt-handler %s's pod directory is not in %s's kubelet directory %s: %v", h.Name, n.Name, n.KubeletRootDir, err)
		}
		for _, other := range c.Env.Nodes {
			if other != n {
				if _, err := os.Stat(other.HostPath(filepath.Join(testenv.KubeletRootDir, "pods", string(h.UID)))); err == nil {
					t.Errorf("virt-handler %s of %s has a pod directory in %s's kubelet directory %s", h.Name, n.Name, other.Name, other.KubeletRootDir)
				}
			}
		}
		pv, err := c.Kube.CoreV1().PersistentVolumes().Get(t.Context(), cluster.BlockVolumeName(n.Name, 0), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms; len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != n.Name {
			t.Errorf("block volume %s is bound to %+v, want node %s", pv.Name, terms, n.Name)
		}
	}
}

// TestVMIOnEachNode boots examples/vm-net.yaml's guest on each node
// (nodeSelector kubernetes.io/hostname): each VMI turns Running on its
// node, with its launcher pod on that node in the node's pod network and
// its socket in that node's kubelet directory (the node's virt-handler
// started it); the console comes through the node's virt-handler; the
// guest on the first node fetches a page from the guest on the second
// over the pod network, which sees the first's pod IP (no NAT between
// the nodes), and the other way round.
func TestVMIOnEachNode(t *testing.T) {
	c := suite.Need(t)
	began := time.Now()
	for _, n := range c.Env.Nodes {
		framework.CreateVM(t, c, netVM(t, "vm-"+n.Name, n.Name))
	}
	podIP := map[string]string{}
	for _, n := range c.Env.Nodes {
		name := "vm-" + n.Name
		vmi := framework.WaitVMI(t, c, name, "Running with an IP", func(vmi *v1.VirtualMachineInstance) bool {
			return vmi.Status.Phase == v1.Running && len(vmi.Status.Interfaces) > 0 && vmi.Status.Interfaces[0].IP != ""
		})
		if vmi.Status.NodeName != n.Name || vmi.Labels[v1.NodeNameLabel] != n.Name {
			t.Errorf("VMI %s runs on %q (label %q), want %s", name, vmi.Status.NodeName, vmi.Labels[v1.NodeNameLabel], n.Name)
		}
		pods, err := c.Kube.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("launcher pods of %s: %v (err %v)", name, len(pods.Items), err)
		}
		pod := pods.Items[0]
		_, podNet, _ := net.ParseCIDR(n.PodCIDR)
		if pod.Spec.NodeName != n.Name || !podNet.Contains(net.ParseIP(pod.Status.PodIP)) || vmi.Status.Interfaces[0].IP != pod.Status.PodIP {
			t.Errorf("launcher pod %s on %s with IP %s (VMI reports %s); want it on %s in %s", pod.Name, pod.Spec.NodeName, pod.Status.PodIP,
				vmi.Status.Interfaces[0].IP, n.Name, n.PodCIDR)
		}
		sockets, _ := filepath.Glob(n.HostPath(filepath.Join(testenv.KubeletRootDir, "pods", string(pod.UID), "volumes", "*", "sockets", string(vmi.UID))))
		if len(sockets) != 1 {
			t.Errorf("launcher %s's socket directory for VMI %s in %s's kubelet directory: %v", pod.Name, vmi.UID, n.Name, sockets)
		}
		podIP[n.Name] = pod.Status.PodIP
		suite.HTTPGetUntil(t, guestURL(pod.Status.PodIP, "/"), "vmkit guest "+name, 90*time.Second)
		t.Logf("%s: create → Running on %s, guest answers HTTP at %s %v after create", name, n.Name, pod.Status.PodIP, time.Since(began).Round(time.Millisecond))
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		lines, err := c.Console(ctx, "default", name, guestMarker)
		cancel()
		if err != nil {
			t.Errorf("console of %s through %s's virt-handler: %v (so far %q)", name, n.Name, err, lines)
		}
	}
	first, second := c.Env.Nodes[0].Name, c.Env.Nodes[1].Name
	// The guest's fetch runs in its launcher pod's network (masquerade:
	// NAT to the pod's IP), so the other guest sees that pod's address.
	suite.HTTPGetUntil(t, guestURL(podIP[first], "/cgi-bin/fetch?"+guestURL(podIP[second], "/cgi-bin/client")), "client "+podIP[first]+"\n", 60*time.Second)
	suite.HTTPGetUntil(t, guestURL(podIP[second], "/cgi-bin/fetch?"+guestURL(podIP[first], "/cgi-bin/client")), "client "+podIP[second]+"\n", 60*time.Second)
	t.Logf("pods reach each other across the nodes: %s (%s) <-> %s (%s), %v after create", podIP[first], first, podIP[second], second,
		time.Since(began).Round(time.Millisecond))
}

// TestStorageOnSecondNode: a pod on localhost-2 with a claim of the
// default StorageClass and a Block claim gets a local-path volume made in
// localhost-2's storage directory and one of localhost-2's block volumes,
// both bound to that node, and what it writes lands there; deleting the
// claim removes the local-path volume's directory (the provisioner's
// helper pod on localhost-2) and releases the block volume.
func TestStorageOnSecondNode(t *testing.T) {
	c := suite.Need(t)
	n := c.Env.Nodes[1]
	block := corev1.PersistentVolumeBlock
	blockClass := cluster.BlockStorageClass
	claims := []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "fs-on-2", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "block-on-2", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:       &block,
			StorageClassName: &blockClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		}},
	}
	for _, claim := range claims {
		if _, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "storage-on-2", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector:  map[string]string{corev1.LabelHostname: n.Name},
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "write", Image: cluster.BusyboxImage + ":" + c.Tag, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:       []string{"sh", "-c", "echo written-on-" + n.Name + " >/data/hello && echo block-on-" + n.Name + " >/dev/blk && sync"},
				VolumeMounts:  []corev1.VolumeMount{{Name: "fs", MountPath: "/data"}},
				VolumeDevices: []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/blk"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "fs", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "fs-on-2"}}},
				{Name: "blk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "block-on-2"}}},
			},
		},
	}
	if _, err := c.Kube.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var fsPV, blockPV *corev1.PersistentVolume
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = c.Kube.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{})
		suite.WaitFor(t, "pod "+pod.Name+" gone", time.Minute, func() (bool, string) {
			_, err := c.Kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		for _, claim := range claims {
			if err := c.Kube.CoreV1().PersistentVolumeClaims("default").Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting claim %s: %v", claim.Name, err)
			}
		}
		if fsPV != nil {
			dir := fsPV.Spec.HostPath.Path
			suite.WaitFor(t, "local-path volume "+fsPV.Name+" and its directory gone", 2*time.Minute, func() (bool, string) {
				_, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, fsPV.Name, metav1.GetOptions{})
				_, serr := os.Stat(dir)
				return apierrors.IsNotFound(err) && os.IsNotExist(serr), fmt.Sprintf("volume: %v, directory: %v", err, serr)
			})
		}
		if blockPV != nil {
			suite.WaitFor(t, "block volume "+blockPV.Name+" Released", time.Minute, func() (bool, string) {
				v, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, blockPV.Name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return v.Status.Phase == corev1.VolumeReleased, string(v.Status.Phase)
			})
			patch := []byte(`[{"op": "remove", "path": "/spec/claimRef"}]`)
			if _, err := c.Kube.CoreV1().PersistentVolumes().Patch(ctx, blockPV.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("making %s Available again: %v", blockPV.Name, err)
			}
		}
	})
	suite.WaitFor(t, "pod "+pod.Name+" Succeeded", 2*time.Minute, func() (bool, string) {
		p, err := c.Kube.CoreV1().Pods("default").Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod %s failed: %+v", pod.Name, p.Status)
		}
		return p.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("%s on %q", p.Status.Phase, p.Spec.NodeName)
	})
	volume := func(claim string) *corev1.PersistentVolume {
		pvc, err := c.Kube.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv, err := c.Kube.CoreV1().PersistentVolumes().Get(t.Context(), pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("volume of claim %s: %v", claim, err)
		}
		if terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms; len(terms) != 1 || len(terms[0].MatchExpressions) != 1 ||
			terms[0].MatchExpressions[0].Values[0] != n.Name {
			t.Errorf("volume %s of claim %s is bound to %+v, want node %s", pv.Name, claim, terms, n.Name)
		}
		return pv
	}
	fsPV, blockPV = volume("fs-on-2"), volume("block-on-2")
	if fsPV.Spec.HostPath == nil || !strings.HasPrefix(fsPV.Spec.HostPath.Path, n.StorageDir+"/") {
		t.Fatalf("claim fs-on-2 is bound to %s, not a directory in %s's storage %s: %+v", fsPV.Name, n.Name, n.StorageDir, fsPV.Spec.PersistentVolumeSource)
	}
	if data, err := os.ReadFile(filepath.Join(fsPV.Spec.HostPath.Path, "hello")); err != nil || string(data) != "written-on-"+n.Name+"\n" {
		t.Errorf("%s/hello: %q, %v", fsPV.Spec.HostPath.Path, data, err)
	}
	if !strings.HasPrefix(blockPV.Name, cluster.BlockVolumeName(n.Name, 0)[:len(cluster.BlockVolumeName(n.Name, 0))-1]) || blockPV.Spec.Local == nil {
		t.Fatalf("claim block-on-2 is bound to %s, not one of %s's block volumes", blockPV.Name, n.Name)
	}
	f, err := os.Open(blockPV.Spec.Local.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	if _, err := io.ReadFull(f, buf); err != nil || !strings.HasPrefix(string(buf), "block-on-"+n.Name+"\n") {
		t.Errorf("%s (block volume %s) starts with %q (%v)", blockPV.Spec.Local.Path, blockPV.Name, buf, err)
	}
	t.Logf("on %s: claim fs-on-2 in %s, block-on-2 on %s (%s)", n.Name, fsPV.Spec.HostPath.Path, blockPV.Name, blockPV.Spec.Local.Path)
}
