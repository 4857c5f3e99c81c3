// Package crds holds the CustomResourceDefinitions of the kubevirt.io,
// instancetype.kubevirt.io, pool.kubevirt.io, export.kubevirt.io and
// snapshot.kubevirt.io APIs, generated from vmapi/v1,
// vmapi/instancetype/v1beta1, vmapi/pool/v1beta1, vmapi/export/v1beta1 and
// vmapi/snapshot/v1beta1 by
// hack/update-codegen.sh and embedded in the binary. Each CRD has a structural schema with CEL validation rules, short
// names and the printer columns kubectl shows, as KubeVirt's.
//
// Names, short names, categories and scope are KubeVirt's, so KubeVirt's
// documented kubectl commands resolve as on KubeVirt: every namespaced kind
// is in the category all and in no other (`kubectl get kubevirt` is the
// KubeVirt kind), the cluster-scoped ones in none.
//
// The kubevirt.io CRDs store v1 and serve v1alpha3 with the same schema;
// they have a status subresource (and scale for
// VirtualMachineInstanceReplicaSet), except VirtualMachineInstance (as
// KubeVirt's) and VirtualMachineInstancePreset, which is deprecated in both
// versions with KubeVirt's warning and has no status.
// The instancetype.kubevirt.io CRDs serve and store v1beta1 and have no
// status. The pool.kubevirt.io CRD (VirtualMachinePool) serves and stores
// v1beta1 and has status and scale subresources. The export.kubevirt.io
// CRD (VirtualMachineExport) serves and stores v1beta1, the version
// KubeVirt's virtctl uses, and has a status subresource; KubeVirt's
// deprecated v1alpha1 is not served. The snapshot.kubevirt.io CRDs
// (VirtualMachineSnapshot, VirtualMachineSnapshotContent,
// VirtualMachineRestore) serve and store v1beta1 and have status
// subresources.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// Names of the CRDs in this package.
const (
	VirtualMachine                   = "virtualmachines.kubevirt.io"
	VirtualMachineInstance           = "virtualmachineinstances.kubevirt.io"
	VirtualMachineInstanceReplicaSet = "virtualmachineinstancereplicasets.kubevirt.io"
	VirtualMachineInstanceMigration  = "virtualmachineinstancemigrations.kubevirt.io"
	KubeVirt                         = "kubevirts.kubevirt.io"
	VirtualMachineInstancePreset     = "virtualmachineinstancepresets.kubevirt.io"

	VirtualMachineInstancetype        = "virtualmachineinstancetypes.instancetype.kubevirt.io"
	VirtualMachineClusterInstancetype = "virtualmachineclusterinstancetypes.instancetype.kubevirt.io"
	VirtualMachinePreference          = "virtualmachinepreferences.instancetype.kubevirt.io"
	VirtualMachineClusterPreference   = "virtualmachineclusterpreferences.instancetype.kubevirt.io"

	VirtualMachinePool = "virtualmachinepools.pool.kubevirt.io"

	VirtualMachineExport = "virtualmachineexports.export.kubevirt.io"

	VirtualMachineSnapshot        = "virtualmachinesnapshots.snapshot.kubevirt.io"
	VirtualMachineSnapshotContent = "virtualmachinesnapshotcontents.snapshot.kubevirt.io"
	VirtualMachineRestore         = "virtualmachinerestores.snapshot.kubevirt.io"
)

// All returns fresh copies of every CRD, sorted by name. The caller may
// modify them.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	parsed, err := decodeOnce()
	if err != nil {
		return nil, err
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, len(parsed))
	for i, crd := range parsed {
		out[i] = crd.DeepCopy()
	}
	return out, nil
}

// decodeOnce parses the embedded manifests the first time they are needed
// (about 60 ms of YAML decoding) and keeps the result; All hands out copies.
var decodeOnce = sync.OnceValues(decodeAll)

func decodeAll() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(manifests, "manifests")
	if err != nil {
		return nil, fmt.Errorf("reading embedded CRDs: %w", err)
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(entries))
	for _, e := range entries {
		crd, err := decode(path.Join("manifests", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns a fresh copy of the CRD with the given name, for example
// crds.VirtualMachine.
func Get(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	for _, crd := range all {
		if crd.Name == name {
			return crd, nil
		}
	}
	return nil, fmt.Errorf("no CRD named %q in vmapi/crds", name)
}

// YAML returns the manifest of every CRD as one multi-document YAML stream,
// ready for kubectl apply --server-side.
func YAML() ([]byte, error) {
	entries, err := fs.ReadDir(manifests, "manifests")
	if err != nil {
		return nil, fmt.Errorf("reading embedded CRDs: %w", err)
	}
	var out []byte
	for _, e := range entries {
		data, err := manifests.ReadFile(path.Join("manifests", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading embedded CRD %s: %w", e.Name(), err)
		}
		out = append(out, data...)
	}
	return out, nil
}

func decode(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := manifests.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading embedded CRD %s: %w", name, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decoding embedded CRD %s: %w", name, err)
	}
	return crd, nil
}
