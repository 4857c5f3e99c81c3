// Package podindex is the index of launcher pods the controllers share:
// pods by the UID of their VMI (the kubevirt.io/created-by label). Every
// controller that looks pods up by VMI adds it to the one shared pod
// informer with Add, which adds it once however many controllers ask.
package podindex

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Name is the index's name on the informer.
const Name = "vmkit.io/created-by"

// Add adds the index to the pod informer unless it is there already. Call
// it before the informer starts.
func Add(pods cache.SharedIndexInformer) error {
	if _, ok := pods.GetIndexer().GetIndexers()[Name]; ok {
		return nil
	}
	if err := pods.AddIndexers(cache.Indexers{Name: byCreator}); err != nil {
		return fmt.Errorf("indexing pods by VMI: %w", err)
	}
	return nil
}

// Of returns the pods in the indexer labelled with the VMI's UID, in the
// VMI's namespace.
func Of(pods cache.Indexer, vmi *v1.VirtualMachineInstance) ([]*corev1.Pod, error) {
	objs, err := pods.ByIndex(Name, string(vmi.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == vmi.Namespace {
			out = append(out, p)
		}
	}
	return out, nil
}

func byCreator(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if uid := pod.Labels[v1.CreatedByLabel]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}
