package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	"github.com/vmkit/vmkit/internal/testenv"
	"github.com/vmkit/vmkit/internal/testenv/hostsetup"
)

// The cluster's storage (docs/cluster.md, "Storage"): Rancher's
// local-path-provisioner (built from the Go module proxy by
// hack/build-storage.sh) provisions Filesystem claims of the default
// StorageClass as directories of the node's storage directory, and
// ReadWriteMany claims of SharedStorageClass in a directory every node
// sees (its shared file system mode: the nodes of a local cluster share
// the host's file system, as the nodes of a real one mount NFS); Block
// claims of StorageClass BlockStorageClass bind to local PersistentVolumes
// over loop devices the cluster attaches when it installs the storage (the
// static provisioning of local block devices, as KubeVirt's CI does it).
// The names of the provisioner's objects are those of its upstream
// manifest (deploy/local-path-storage.yaml).
const (
	// StorageNamespace holds the provisioner and its helper pods.
	StorageNamespace = "local-path-storage"
	// LocalPathProvisioner is the provisioner's Deployment and its name in
	// StorageClasses (provisioner rancher.io/local-path).
	LocalPathProvisioner     = "local-path-provisioner"
	localPathProvisionerName = "rancher.io/local-path"
	localPathServiceAccount  = "local-path-provisioner-service-account"
	localPathRole            = "local-path-provisioner-role"
	localPathBinding         = "local-path-provisioner-bind"
	localPathConfig          = "local-path-config"
	// DefaultStorageClass is the default StorageClass: Filesystem volumes,
	// provisioned when a pod using the claim is scheduled
	// (WaitForFirstConsumer), deleted with their claim.
	DefaultStorageClass = "vmkit-local-path"
	// SharedStorageClass is the StorageClass of claims every node can
	// use at once (ReadWriteMany, what a VMI's claims must be for it to
	// migrate): local-path-provisioner's shared file system mode, its
	// volumes directories of StorageOptions.Dir's shared/ with no node
	// affinity, bound as soon as they are claimed (Immediate), deleted
	// with their claim.
	SharedStorageClass = "vmkit-shared-path"
	// BlockStorageClass is the StorageClass of the node's local block
	// devices (Block claims), retained when their claim goes.
	BlockStorageClass = "vmkit-local-block"
	// BlockVolumePrefix names the block devices' PersistentVolumes:
	// vmkit-local-block-0, -1, ...
	BlockVolumePrefix = BlockStorageClass + "-"
	// BusyboxImage is the busybox image (Debian's busybox-static) of the
	// provisioner's helper pods and of pods that fill claims.
	BusyboxImage = Registry + "/busybox"
)

// Defaults of StorageOptions.
const (
	DefaultBlockVolumes    = 4
	DefaultBlockVolumeSize = 1 << 30
	// DefaultOtherNodeBlockVolumes is how many block volumes each node
	// after the first gets.
	DefaultOtherNodeBlockVolumes = 2
)

// StorageOptions configure the storage InstallStorage sets up.
type StorageOptions struct {
	// Dir is the first node's storage directory (testenv.Node.StorageDir;
	// a cluster from New knows it, one from Connect must be told, see
	// testenv.NodeStorageDir). The provisioner keeps its volumes in
	// Dir/local-path, the block devices' backing files are Dir/block/<PV>.
	Dir string
	// OtherNodeDirs are the storage directories of the nodes after the
	// first, by node name (testenv.NodeStorageDirAt; known to a cluster
	// from New): each node's volumes are in its own directory.
	OtherNodeDirs map[string]string
	// BlockVolumes is how many local block PersistentVolumes to offer on
	// the first node (default DefaultBlockVolumes; the other nodes get
	// DefaultOtherNodeBlockVolumes each); BlockVolumeSize their size in
	// bytes (default DefaultBlockVolumeSize; sparse files, they take what
	// is written).
	BlockVolumes    int
	BlockVolumeSize int64
}

// BlockVolumeName is the name of block volume i of node: vmkit-local-block-<i>
// on the first node (testenv.NodeName), vmkit-local-block-<node>-<i> on the
// others.
func BlockVolumeName(node string, i int) string {
	if node == testenv.NodeName {
		return BlockVolumePrefix + strconv.Itoa(i)
	}
	return BlockVolumePrefix + node + "-" + strconv.Itoa(i)
}

// StorageObjects are the objects of the cluster's storage but the block
// volumes: the provisioner's Namespace, ServiceAccount, RBAC (as upstream),
// ConfigMap (per StorageClass: the default class's volumes in dataDir, on
// the nodes named in otherDataDirs in their directory; the shared class's
// in sharedDir; helper pods running busybox) and Deployment, the default
// StorageClass, the shared StorageClass and the block StorageClass.
func StorageObjects(tag, dataDir, sharedDir string, otherDataDirs map[string]string) ([]runtime.Object, error) {
	pathMap := []map[string]any{{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []string{dataDir}}}
	for _, node := range slices.Sorted(maps.Keys(otherDataDirs)) {
		pathMap = append(pathMap, map[string]any{"node": node, "paths": []string{otherDataDirs[node]}})
	}
	// One configuration per StorageClass (the provisioner then refuses
	// claims of any other class that names it).
	config, err := json.MarshalIndent(map[string]any{"storageClassConfigs": map[string]any{
		DefaultStorageClass: map[string]any{"nodePathMap": pathMap},
		SharedStorageClass:  map[string]any{"sharedFileSystemPath": sharedDir},
	}}, "", "  ")
	if err != nil {
		return nil, err
	}
	busybox := BusyboxImage + ":" + tag
	helperPod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  priorityClassName: system-node-critical
  tolerations:
  - key: node.kubernetes.io/disk-pressure
    operator: Exists
    effect: NoSchedule
  containers:
  - name: helper-pod
    image: %s
    imagePullPolicy: IfNotPresent
`, busybox)
	ns := StorageNamespace
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": LocalPathProvisioner}}
	}
	typ := func(gv schema.GroupVersion, kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: gv.String(), Kind: kind}
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: localPathServiceAccount, Namespace: ns}}
	replicas := int32(1)
	fsMode, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	deleteClaim, retain := corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain
	probe := func(path string, delay, period int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}},
			InitialDelaySeconds: delay, PeriodSeconds: period,
		}
	}
	core, rbac, apps, storage := corev1.SchemeGroupVersion, rbacv1.SchemeGroupVersion, appsv1.SchemeGroupVersion, storagev1.SchemeGroupVersion
	return []runtime.Object{
		&corev1.Namespace{TypeMeta: typ(core, "Namespace"), ObjectMeta: meta(ns, "")},
		&corev1.ServiceAccount{TypeMeta: typ(core, "ServiceAccount"), ObjectMeta: meta(localPathServiceAccount, ns)},
		&rbacv1.Role{TypeMeta: typ(rbac, "Role"), ObjectMeta: meta(localPathRole, ns), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
		}},
		&rbacv1.ClusterRole{TypeMeta: typ(rbac, "ClusterRole"), ObjectMeta: meta(localPathRole, ""), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.RoleBinding{TypeMeta: typ(rbac, "RoleBinding"), ObjectMeta: meta(localPathBinding, ns), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: localPathRole}},
		&rbacv1.ClusterRoleBinding{TypeMeta: typ(rbac, "ClusterRoleBinding"), ObjectMeta: meta(localPathBinding, ""), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: localPathRole}},
		&corev1.ConfigMap{TypeMeta: typ(core, "ConfigMap"), ObjectMeta: meta(localPathConfig, ns), Data: map[string]string{
			"config.json":    string(config),
			"setup":          "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
			"teardown":       "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
			"helperPod.yaml": helperPod,
		}},
		&appsv1.Deployment{TypeMeta: typ(apps, "Deployment"), ObjectMeta: meta(LocalPathProvisioner, ns), Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": LocalPathProvisioner}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": LocalPathProvisioner}},
				Spec: corev1.PodSpec{
					ServiceAccountName: localPathServiceAccount,
					Containers: []corev1.Container{{
						Name:            LocalPathProvisioner,
						Image:           Registry + "/" + LocalPathProvisioner + ":" + tag,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"local-path-provisioner", "--debug", "start",
							"--config", "/etc/config/config.json", "--helper-image", busybox},
						Ports:          []corev1.ContainerPort{{Name: "health", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
						LivenessProbe:  probe("/health", 10, 10),
						ReadinessProbe: probe("/ready", 1, 2),
						VolumeMounts:   []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/config/"}},
						Env: []corev1.EnvVar{
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: "CONFIG_MOUNT_PATH", Value: "/etc/config/"},
							{Name: "HEALTH_PORT", Value: "8080"},
						},
					}},
					Volumes: []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: localPathConfig}},
					}}},
				},
			},
		}},
		&storagev1.StorageClass{
			TypeMeta: typ(storage, "StorageClass"),
			ObjectMeta: metav1.ObjectMeta{Name: DefaultStorageClass, Annotations: map[string]string{
				"storageclass.kubernetes.io/is-default-class": "true",
			}},
			Provisioner:       localPathProvisionerName,
			VolumeBindingMode: &fsMode,
			ReclaimPolicy:     &deleteClaim,
		},
		&storagev1.StorageClass{
			TypeMeta:          typ(storage, "StorageClass"),
			ObjectMeta:        metav1.ObjectMeta{Name: SharedStorageClass},
			Provisioner:       localPathProvisionerName,
			VolumeBindingMode: &immediate,
			ReclaimPolicy:     &deleteClaim,
		},
		&storagev1.StorageClass{
			TypeMeta:          typ(storage, "StorageClass"),
			ObjectMeta:        metav1.ObjectMeta{Name: BlockStorageClass},
			Provisioner:       "kubernetes.io/no-provisioner",
			VolumeBindingMode: &fsMode,
			ReclaimPolicy:     &retain,
		},
	}, nil
}

// BlockVolume is the PersistentVolume of one local block device of node:
// Block mode, ReadWriteOnce, bound to the node, retained.
func BlockVolume(name, node, device string, size int64) *corev1.PersistentVolume {
	block := corev1.PersistentVolumeBlock
	return &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": BlockStorageClass, corev1.LabelHostname: node}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			VolumeMode:                    &block,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              BlockStorageClass,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: device}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// storageResources maps the kinds of the storage objects to their resources.
var storageResources = map[string]struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	"Namespace":          {schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
	"ServiceAccount":     {schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true},
	"ConfigMap":          {schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
	"PersistentVolume":   {schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}, false},
	"Role":               {rbacv1.SchemeGroupVersion.WithResource("roles"), true},
	"RoleBinding":        {rbacv1.SchemeGroupVersion.WithResource("rolebindings"), true},
	"ClusterRole":        {rbacv1.SchemeGroupVersion.WithResource("clusterroles"), false},
	"ClusterRoleBinding": {rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), false},
	"Deployment":         {appsv1.SchemeGroupVersion.WithResource("deployments"), true},
	"StorageClass":       {storagev1.SchemeGroupVersion.WithResource("storageclasses"), false},
}

// applyStorage server-side-applies one storage object.
func (c *Cluster) applyStorage(ctx context.Context, o runtime.Object) error {
	u := &unstructured.Unstructured{}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	u.Object = content
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	r, ok := storageResources[u.GetKind()]
	if !ok {
		return fmt.Errorf("cluster: no resource for kind %s", u.GetKind())
	}
	var ri dynamic.ResourceInterface = c.Dynamic.Resource(r.gvr)
	if r.namespaced {
		ri = c.Dynamic.Resource(r.gvr).Namespace(u.GetNamespace())
	}
	if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "vmkit-cluster", Force: true}); err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// InstallStorage sets up the cluster's storage: the provisioner and the
// default StorageClass (StorageObjects, server-side applied, so it can run
// again), and on each node local block devices (o.BlockVolumes on the
// first, DefaultOtherNodeBlockVolumes on the others): sparse files in the
// node's storage directory's block/ attached to loop devices
// (hostsetup.AttachLoop), offered as PersistentVolumes of BlockStorageClass
// bound to the node (BlockVolumeName). A block volume whose
// PersistentVolume exists is kept as it is. The nodes detach the loop
// devices when they stop. WaitStorage waits for the provisioner.
func (c *Cluster) InstallStorage(ctx context.Context, o StorageOptions) error {
	if c.Env != nil && c.Env.Node != nil {
		if o.Dir == "" {
			o.Dir = c.Env.Node.StorageDir
		}
		if o.OtherNodeDirs == nil {
			o.OtherNodeDirs = map[string]string{}
			for _, n := range c.Env.Nodes[1:] {
				o.OtherNodeDirs[n.Name] = n.StorageDir
			}
		}
	}
	if o.Dir == "" {
		return errors.New("cluster: InstallStorage needs the node's storage directory (StorageOptions.Dir, testenv.NodeStorageDir)")
	}
	if len(o.OtherNodeDirs) != c.Nodes-1 {
		return fmt.Errorf("cluster: InstallStorage: StorageOptions.OtherNodeDirs names %d nodes, the cluster has %d after the first (testenv.NodeStorageDirAt)", len(o.OtherNodeDirs), c.Nodes-1)
	}
	if o.BlockVolumes == 0 {
		o.BlockVolumes = DefaultBlockVolumes
	}
	if o.BlockVolumeSize == 0 {
		o.BlockVolumeSize = DefaultBlockVolumeSize
	}
	type nodeStorage struct {
		name, dir string
		volumes   int
	}
	nodes := []nodeStorage{{testenv.NodeName, o.Dir, o.BlockVolumes}}
	otherDataDirs := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(o.OtherNodeDirs)) {
		nodes = append(nodes, nodeStorage{name, o.OtherNodeDirs[name], DefaultOtherNodeBlockVolumes})
		otherDataDirs[name] = filepath.Join(o.OtherNodeDirs[name], "local-path")
	}
	for _, n := range nodes {
		for _, d := range []string{filepath.Join(n.dir, "local-path"), filepath.Join(n.dir, "block")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
	}
	shared := filepath.Join(o.Dir, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return err
	}
	objs, err := StorageObjects(c.Tag, filepath.Join(o.Dir, "local-path"), shared, otherDataDirs)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := c.applyStorage(ctx, obj); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		for i := range n.volumes {
			name := BlockVolumeName(n.name, i)
			switch _, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); {
			case err == nil:
				continue
			case !apierrors.IsNotFound(err):
				return err
			}
			file := filepath.Join(n.dir, "block", name+".img")
			if err := makeSparse(file, o.BlockVolumeSize); err != nil {
				return err
			}
			dev, err := hostsetup.AttachLoop(file)
			if err != nil {
				return err
			}
			if err := c.applyStorage(ctx, BlockVolume(name, n.name, dev, o.BlockVolumeSize)); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeSparse creates a sparse file of size bytes (replacing one left over).
func makeSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WaitStorage waits until the provisioner's Deployment is available (its
// pod answers its readiness probe).
func (c *Cluster) WaitStorage(ctx context.Context) error {
	last := "not found"
	err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(StorageNamespace).Get(ctx, LocalPathProvisioner, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, d.Status.Replicas)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas > 0, nil
	})
	if err != nil {
		return fmt.Errorf("the storage provisioner (Deployment %s/%s) is not available: %w (last seen: %s)\n%s", StorageNamespace, LocalPathProvisioner, err, last,
			c.PodLogs(context.Background(), StorageNamespace, "app="+LocalPathProvisioner, 20))
	}
	return nil
}
