package vm

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmcontrol/internal/cdi"
)

// dataSourceResource is CDI's DataSource API, which a DataVolume's
// sourceRef may name.
var dataSourceResource = schema.GroupVersionResource{Group: cdi.DataVolumeResource.Group, Version: cdi.DataVolumeResource.Version, Resource: "datasources"}

// inferenceError is a volume that does not name an instance type or
// preference: the Ignore policy goes on without one.
type inferenceError struct{ msg string }

func (e *inferenceError) Error() string { return e.msg }

// inferFromVolume returns the name and kind the VM's volume labels with
// nameLabel and kindLabel, looked up as KubeVirt does: a
// persistentVolumeClaim volume's claim; a dataVolume volume's DataVolume
// (its labels, else its source), or the source of the VM's
// dataVolumeTemplate of that name, or, once the DataVolume is gone, the
// claim of its name. A source is a claim, or a DataSource (its labels, else
// its claim).
func (c *Controller) inferFromVolume(vm *v1.VirtualMachine, volume, nameLabel, kindLabel string) (name, kind string, err error) {
	if vm.Spec.Template == nil {
		return "", "", &inferenceError{fmt.Sprintf("unable to infer defaults from volume %s as the VM has no template", volume)}
	}
	l := labelReader{c: c, nameLabel: nameLabel, kindLabel: kindLabel}
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		if vol.Name != volume {
			continue
		}
		switch {
		case vol.PersistentVolumeClaim != nil:
			return l.claim(vm.Namespace, vol.PersistentVolumeClaim.ClaimName)
		case vol.DataVolume != nil:
			return l.dataVolume(vm, vol.DataVolume.Name)
		}
		return "", "", &inferenceError{fmt.Sprintf("unable to infer defaults from volume %s as type is not supported", volume)}
	}
	return "", "", &inferenceError{fmt.Sprintf("unable to find volume %s to infer defaults", volume)}
}

// missingSourceError is a volume's claim or DataSource that does not exist
// (yet): nothing tells the controller when it appears, so it looks again later.
type missingSourceError struct{ err error }

func (e *missingSourceError) Error() string { return e.err.Error() }
func (e *missingSourceError) Unwrap() error { return e.err }

func missing(err error) error {
	if apierrors.IsNotFound(err) {
		return &missingSourceError{err}
	}
	return err
}

type labelReader struct {
	c                    *Controller
	nameLabel, kindLabel string
}

func (l labelReader) fromLabels(labels map[string]string) (string, string, error) {
	name, ok := labels[l.nameLabel]
	if !ok {
		return "", "", &inferenceError{fmt.Sprintf("unable to find required %s label on the volume", l.nameLabel)}
	}
	return name, labels[l.kindLabel], nil
}

func (l labelReader) claim(namespace, name string) (string, string, error) {
	if l.c.claims == nil {
		return "", "", fmt.Errorf("cannot read PersistentVolumeClaim %s/%s: the VM controller watches no claims", namespace, name)
	}
	pvc, err := l.c.claims.PersistentVolumeClaims(namespace).Get(name)
	if err != nil {
		return "", "", missing(fmt.Errorf("PersistentVolumeClaim %s/%s: %w", namespace, name, err))
	}
	return l.fromLabels(pvc.Labels)
}

func (l labelReader) dataVolume(vm *v1.VirtualMachine, name string) (string, string, error) {
	for i := range vm.Spec.DataVolumeTemplates {
		if tmpl := &vm.Spec.DataVolumeTemplates[i]; tmpl.ObjectMeta.Name == name {
			u, err := NewDataVolume(vm, i)
			if err != nil {
				return "", "", err
			}
			return l.source(vm.Namespace, u)
		}
	}
	if l.c.dataVolumes == nil {
		return l.claim(vm.Namespace, name)
	}
	obj, exists, err := l.c.dataVolumes.GetByKey(vm.Namespace + "/" + name)
	if err != nil {
		return "", "", err
	}
	if !exists {
		return l.claim(vm.Namespace, name) // garbage-collected DataVolumes leave their claim
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return "", "", fmt.Errorf("DataVolume %s/%s: unexpected %T in the cache", vm.Namespace, name, obj)
	}
	if n, k, err := l.fromLabels(u.GetLabels()); err == nil {
		return n, k, nil
	}
	return l.source(vm.Namespace, u)
}

// source follows a DataVolume's spec.source.pvc or spec.sourceRef.
func (l labelReader) source(namespace string, dv *unstructured.Unstructured) (string, string, error) {
	if pvc, ok, _ := unstructured.NestedStringMap(dv.Object, "spec", "source", "pvc"); ok && pvc["name"] != "" {
		ns := pvc["namespace"]
		if ns == "" {
			ns = namespace
		}
		return l.claim(ns, pvc["name"])
	}
	if ref, ok, _ := unstructured.NestedStringMap(dv.Object, "spec", "sourceRef"); ok {
		if ref["kind"] != "DataSource" {
			return "", "", &inferenceError{fmt.Sprintf("unable to infer defaults from DataVolumeSourceRef as Kind %s is not supported", ref["kind"])}
		}
		ns := ref["namespace"]
		if ns == "" {
			ns = namespace
		}
		return l.dataSource(ns, ref["name"])
	}
	return "", "", &inferenceError{"unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported"}
}

func (l labelReader) dataSource(namespace, name string) (string, string, error) {
	if l.c.dynamic == nil {
		return "", "", &inferenceError{"unable to infer defaults from a DataSource: CDI is not installed"}
	}
	ds, err := l.c.dynamic.Resource(dataSourceResource).Namespace(namespace).Get(context.TODO(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", "", missing(fmt.Errorf("DataSource %s/%s: %w", namespace, name, err))
	}
	if err != nil {
		return "", "", err
	}
	if n, k, err := l.fromLabels(ds.GetLabels()); err == nil {
		return n, k, nil
	}
	if pvc, ok, _ := unstructured.NestedStringMap(ds.Object, "spec", "source", "pvc"); ok && pvc["name"] != "" {
		ns := pvc["namespace"]
		if ns == "" {
			ns = namespace
		}
		return l.claim(ns, pvc["name"])
	}
	return "", "", &inferenceError{"unable to infer defaults from DataSource that doesn't provide DataVolumeSourcePVC"}
}
