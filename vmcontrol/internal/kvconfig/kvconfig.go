// Package kvconfig reads the KubeVirt CR's configuration from an informer's
// store, as the controllers need it at each sync: a change of the CR
// applies to the next object a controller acts on, with no restart.
package kvconfig

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Of returns the KubeVirt CR in store that is not being deleted, or nil
// when there is none (or store is nil). A cluster has one.
func Of(store cache.Store) *v1.KubeVirt {
	if store == nil {
		return nil
	}
	for _, o := range store.List() {
		if kv, ok := o.(*v1.KubeVirt); ok && kv.DeletionTimestamp == nil {
			return kv
		}
	}
	return nil
}

// Configuration is the spec.configuration of the KubeVirt CR in store, or
// nil when there is none.
func Configuration(store cache.Store) *v1.KubeVirtConfiguration {
	if kv := Of(store); kv != nil {
		return &kv.Spec.Configuration
	}
	return nil
}

// SetDefaults fills in the defaults of a new VMI's spec with kv's
// configuration (v1.SetClusterDefaults, and the hotplug headroom of
// v1.SetHotplugDefaults; kv nil: KubeVirt's defaults). An
// error names the KubeVirt CR and the field of it that cannot be applied.
func SetDefaults(spec *v1.VirtualMachineInstanceSpec, kv *v1.KubeVirt) error {
	if kv == nil {
		if err := v1.SetClusterDefaults(spec, nil); err != nil {
			return err
		}
		v1.SetHotplugDefaults(spec, nil)
		return nil
	}
	if err := v1.SetClusterDefaults(spec, &kv.Spec.Configuration); err != nil {
		return fmt.Errorf("KubeVirt %s/%s: %w", kv.Namespace, kv.Name, err)
	}
	v1.SetHotplugDefaults(spec, &kv.Spec.Configuration)
	return nil
}
