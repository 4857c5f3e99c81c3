// Package installstrategy turns a deployment configuration (registry,
// version, namespace, pull policy and a few settings of the KubeVirt CR) into
// the install strategy of vmkit: every object the system needs, as typed
// objects: the CRDs from vmapi/crds, one service account per component with
// least-privilege cluster roles and bindings, KubeVirt's cluster roles for
// users (kubevirt.io:admin, edit and view, aggregated into Kubernetes'
// admin, edit and view, and kubevirt.io:default for every authenticated
// user), the Services, the virt-api and virt-controller Deployments, the
// virt-handler DaemonSet and the APIService v1.subresources.kubevirt.io,
// which makes virt-api the aggregated API server of subresources.kubevirt.io.
//
// A Strategy is encoded to and decoded from a ConfigMap (ToConfigMap,
// FromConfigMap), as virt-operator --dump-install-strategy writes it, and
// applied to a cluster by Apply: idempotently (an object is written only when
// it differs from what the strategy holds), in dependency order (CRDs are
// established before anything else is written), pruning the objects that
// carry vmkit's managed-by label but are no longer part of the strategy.
// Delete removes everything, CRDs last.
//
// A strategy is pure: the same config gives the same objects. The
// installation's certificates are random, so they are not part of it:
// EnsureCertificates creates the CA (Secret and ConfigMap kubevirt-ca),
// virt-api's serving certificate (kubevirt-virt-api-certs) and
// virt-handler's server and client certificates, and re-issues them before
// they expire; the operator calls it before Apply and passes the CA bundle
// it returns in ApplyOptions.CABundle, which Apply writes into the
// APIService's caBundle (and rewrites when the CA is rotated), so that the
// aggregator verifies virt-api's certificate.
//
// DeploymentConfig.WithoutVirtAPI (EnvWithoutVirtAPI) leaves virt-api, its
// Service and its APIService out, for clusters where another virt-api
// serves subresources.kubevirt.io; nothing sets it by default.
//
// The package is pure Go (no cgo, no libvirt) and talks to the API server
// through a dynamic client only.
package installstrategy
