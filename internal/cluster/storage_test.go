package cluster

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// TestStorageObjects: one default StorageClass, the provisioner's; its
// volumes in the data directory; the shared class's in the shared
// directory, bound at once; helper pods and the provisioner on the
// cluster's images; every object of a kind InstallStorage can apply.
func TestStorageObjects(t *testing.T) {
	objs, err := StorageObjects("v9", "/run/x/node/storage/local-path", "/run/x/node/storage/shared", map[string]string{"localhost-2": "/run/x/node-2/storage/local-path"})
	if err != nil {
		t.Fatal(err)
	}
	var defaults, classes []string
	var cm *corev1.ConfigMap
	var deploy *appsv1.Deployment
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if _, ok := storageResources[kind]; !ok {
			t.Errorf("%s %s: no resource to apply it", kind, m.GetName())
		}
		switch o := o.(type) {
		case *storagev1.StorageClass:
			if o.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
				defaults = append(defaults, o.Name+" "+o.Provisioner)
			}
			want := storagev1.VolumeBindingWaitForFirstConsumer // local volumes
			if o.Name == SharedStorageClass {
				want = storagev1.VolumeBindingImmediate // every node has them
			}
			if o.VolumeBindingMode == nil || *o.VolumeBindingMode != want {
				t.Errorf("StorageClass %s binds %v, want %s", o.Name, o.VolumeBindingMode, want)
			}
			classes = append(classes, o.Name)
		case *corev1.ConfigMap:
			cm = o
		case *appsv1.Deployment:
			deploy = o
		}
	}
	if diff := cmp.Diff([]string{DefaultStorageClass + " rancher.io/local-path"}, defaults); diff != "" {
		t.Errorf("default StorageClasses (-want +got):\n%s", diff)
	}
	if cm == nil || deploy == nil {
		t.Fatal("no ConfigMap or Deployment")
	}
	if diff := cmp.Diff([]string{DefaultStorageClass, SharedStorageClass, BlockStorageClass}, classes); diff != "" {
		t.Errorf("StorageClasses (-want +got):\n%s", diff)
	}
	var configs struct {
		StorageClassConfigs map[string]struct {
			NodePathMap []struct {
				Node  string
				Paths []string
			}
			SharedFileSystemPath string
		}
	}
	if err := json.Unmarshal([]byte(cm.Data["config.json"]), &configs); err != nil {
		t.Fatal(err)
	}
	if len(configs.StorageClassConfigs) != 2 {
		t.Errorf("config.json %s: want a configuration for the default and the shared class", cm.Data["config.json"])
	}
	if shared := configs.StorageClassConfigs[SharedStorageClass]; shared.SharedFileSystemPath != "/run/x/node/storage/shared" || len(shared.NodePathMap) != 0 {
		t.Errorf("config.json %s: want the shared class's volumes in the shared directory alone", cm.Data["config.json"])
	}
	config := configs.StorageClassConfigs[DefaultStorageClass]
	if len(config.NodePathMap) != 2 || !cmp.Equal(config.NodePathMap[0].Paths, []string{"/run/x/node/storage/local-path"}) ||
		config.NodePathMap[1].Node != "localhost-2" || !cmp.Equal(config.NodePathMap[1].Paths, []string{"/run/x/node-2/storage/local-path"}) {
		t.Errorf("config.json %s: want the volumes in the data directory, localhost-2's in its own", cm.Data["config.json"])
	}
	if !strings.Contains(cm.Data["helperPod.yaml"], "image: vmkit/busybox:v9\n") {
		t.Errorf("helper pod not on vmkit/busybox:v9:\n%s", cm.Data["helperPod.yaml"])
	}
	if got := deploy.Spec.Template.Spec.Containers[0].Image; got != "vmkit/local-path-provisioner:v9" {
		t.Errorf("provisioner image %s", got)
	}
}

func TestBlockVolume(t *testing.T) {
	if got := BlockVolumeName("localhost", 0); got != "vmkit-local-block-0" {
		t.Errorf("the first node's first block volume is %s", got)
	}
	if got := BlockVolumeName("localhost-2", 1); got != "vmkit-local-block-localhost-2-1" {
		t.Errorf("localhost-2's second block volume is %s", got)
	}
	pv := BlockVolume("vmkit-local-block-localhost-2-1", "localhost-2", "/dev/loop3", 1<<30)
	if pv.Spec.Local == nil || pv.Spec.Local.Path != "/dev/loop3" || *pv.Spec.VolumeMode != corev1.PersistentVolumeBlock ||
		pv.Spec.StorageClassName != BlockStorageClass || pv.Spec.Capacity.Storage().String() != "1Gi" ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("block volume %+v", pv.Spec)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "localhost-2" {
		t.Errorf("node affinity %+v, want the node localhost-2", terms)
	}
}
