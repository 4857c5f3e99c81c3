package testenv

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Secondary networks (NodeOptions.Multus): Multus' thin CNI plugin
// (hack/build-multus.sh) is every node's first CNI network, with the node's
// pod network as its delegate, as on a cluster where Multus is installed.
// It attaches the networks a pod's k8s.v1.cni.cncf.io/networks annotation
// selects, each from its NetworkAttachmentDefinition (whose CRD Start
// installs), and writes the pod's k8s.v1.cni.cncf.io/network-status. It
// reads the API server as the user MultusUser, with the rights Multus'
// own ClusterRole gives it.
const (
	// MultusBinaryEnv, when set, names the Multus binary (default <module
	// root>/_output/bin/multus).
	MultusBinaryEnv = "VMKIT_MULTUS"
	// MultusUser is the user Multus authenticates as.
	MultusUser = "vmkit:multus"
	// NetworkAttachmentDefinitionCRD is the name of Multus' CRD.
	NetworkAttachmentDefinitionCRD = "network-attachment-definitions.k8s.cni.cncf.io"
)

// multusBinary returns the Multus binary, or an error naming the command
// that builds it.
func multusBinary() (string, error) {
	p := os.Getenv(MultusBinaryEnv)
	if p == "" {
		root, err := ModuleRoot()
		if err != nil {
			return "", err
		}
		p = filepath.Join(root, "_output", "bin", "multus")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("the Multus CNI plugin %s is missing: build it with `hack/build-multus.sh` (run by `make test-deps`)", p)
	}
	return p, nil
}

// writeMultus makes the node's CNI plugin directory (the system's plugins
// and Multus, as links) and writes Multus' network configuration, with
// podNetwork (a conflist) as its delegate, and its kubeconfig. It returns
// the plugin directory, for containerd.
func (n *Node) writeMultus(p *pki, server, systemPlugins, podNetwork string) (string, error) {
	bin, err := multusBinary()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(n.dir, "cni-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	plugins, err := os.ReadDir(systemPlugins)
	if err != nil {
		return "", err
	}
	links := map[string]string{"multus": bin}
	for _, pl := range plugins {
		links[pl.Name()] = filepath.Join(systemPlugins, pl.Name())
	}
	for name, target := range links {
		link := filepath.Join(dir, name)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return "", err
		}
	}
	kubeconfig := filepath.Join(n.dir, "multus.kubeconfig")
	cert, key, err := p.clientCert(pkix.Name{CommonName: MultusUser})
	if err != nil {
		return "", fmt.Errorf("the certificate of Multus: %w", err)
	}
	if err := writeKubeconfig(kubeconfig, server, p.caCertPEM, MultusUser, cert, key); err != nil {
		return "", err
	}
	conf, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "multus-cni-network",
		"type":       "multus",
		"kubeconfig": kubeconfig,
		"cniDir":     filepath.Join(n.dir, "multus"),
		"binDir":     dir,
		"logFile":    filepath.Join(n.dir, "multus.log"),
		"logLevel":   "verbose",
		"delegates":  []json.RawMessage{json.RawMessage(podNetwork)},
	}, "", "  ")
	if err != nil {
		return "", err
	}
	// containerd takes the first configuration in its directory by name.
	return dir, os.WriteFile(filepath.Join(n.dir, "cni", "00-multus.conf"), conf, 0o644)
}

// installMultusAPI installs what Multus reads and writes through the API
// server: the NetworkAttachmentDefinition CRD, and Multus' ClusterRole
// bound to MultusUser.
func (e *Env) installMultusAPI(ctx context.Context) error {
	if err := e.InstallCRDs(ctx, networkAttachmentDefinitionCRD()); err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "vmkit-multus"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	if _, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Multus' ClusterRole: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vmkit-multus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: MultusUser}},
	}
	if _, err := e.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Multus' ClusterRoleBinding: %w", err)
	}
	return nil
}

// networkAttachmentDefinitionCRD is Multus' CRD (k8s.cni.cncf.io/v1
// NetworkAttachmentDefinition, from the Network Plumbing Working Group's
// specification, as Multus' deployment manifests install it).
func networkAttachmentDefinitionCRD() *apiextensionsv1.CustomResourceDefinition {
	str := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: NetworkAttachmentDefinitionCRD},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "k8s.cni.cncf.io",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "network-attachment-definitions", Singular: "network-attachment-definition",
				Kind: "NetworkAttachmentDefinition", ListKind: "NetworkAttachmentDefinitionList", ShortNames: []string{"net-attach-def"},
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": str(""), "kind": str(""), "metadata": {Type: "object"},
						"spec": {Type: "object", Description: "how a pod attaches to the network",
							Properties: map[string]apiextensionsv1.JSONSchemaProps{"config": str("the network's CNI configuration, as JSON")}},
					},
				}},
			}},
		},
	}
}
