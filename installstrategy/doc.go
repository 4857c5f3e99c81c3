// Package installstrategy turns a deployment configuration (registry,
// version, namespace, pull policy and a few settings of the KubeVirt CR) into
// the install strategy of vmkit: every object the system needs, as typed
// objects: the CRDs from vmapi/crds, one service account per component with
// least-privilege cluster roles and bindings, the Services, the virt-api and
// virt-controller Deployments, the virt-handler DaemonSet and the virt-api
// APIService.
//
// A Strategy is encoded to and decoded from a ConfigMap (ToConfigMap,
// FromConfigMap), as virt-operator --dump-install-strategy writes it, and
// applied to a cluster by Apply: idempotently (an object is written only when
// it differs from what the strategy holds), in dependency order (CRDs are
// established before anything else is written), pruning the objects that
// carry vmkit's managed-by label but are no longer part of the strategy.
// Delete removes everything, CRDs last.
//
// The package is pure Go (no cgo, no libvirt) and talks to the API server
// through a dynamic client only.
package installstrategy
