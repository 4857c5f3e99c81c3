package exportserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// The files of Config.ManifestDir, which the export controller writes
// from its ConfigMap.
const (
	vmManifestFile = "virtualmachine-manifest"
	exportNameFile = "export-name"
)

// manifestSide is the internal (in-cluster Service) or external
// (Ingress or Route) view of the manifests: which host the download URLs
// name and which CA the client is to trust.
type manifestSide struct {
	prefix   string
	hostFile string
	caFile   string
}

var (
	internalSide = manifestSide{prefix: internalPrefix, hostFile: "internal_host", caFile: "internal_ca_cm"}
	externalSide = manifestSide{prefix: externalPrefix, hostFile: "external_host", caFile: "external_ca_cm"}
)

// headerSecretName is the Secret holding the token as a CDI extra header,
// named as KubeVirt names it.
func headerSecretName(exportName string) string { return "header-secret-" + exportName }

// serveVM answers the VM's manifests as seen from side: the CA ConfigMap
// (when the controller wrote one) and the VirtualMachine, its
// dataVolumeTemplates pointed at this export. 404 when side has no host:
// an export without an Ingress or Route has no external side.
func (s *Server) serveVM(w http.ResponseWriter, r *http.Request, side manifestSide) {
	host, err := s.readManifestFile(side.hostFile)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && host == "") {
		http.NotFound(w, r) // no such side
		return
	}
	if err != nil {
		internalError(w, r, err, "Cannot read the export's host")
		return
	}
	var objects []any
	var caName string
	switch data, err := s.readManifestFile(side.caFile); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		internalError(w, r, fmt.Errorf("reading the CA ConfigMap: %w", err), "Cannot read the CA ConfigMap")
		return
	default:
		var cm corev1.ConfigMap
		if err := json.Unmarshal([]byte(data), &cm); err != nil {
			internalError(w, r, fmt.Errorf("decoding %s: %w", side.caFile, err), "Cannot read the CA ConfigMap")
			return
		}
		cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
		caName = cm.Name
		objects = append(objects, &cm)
	}

	data, err := s.readManifestFile(vmManifestFile)
	if err != nil {
		internalError(w, r, fmt.Errorf("reading the VM manifest: %w", err), "Cannot read the VM manifest")
		return
	}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber() // integers stay exact
	var vm map[string]any
	if err := dec.Decode(&vm); err != nil || vm == nil {
		if err == nil {
			err = errors.New("not an object")
		}
		internalError(w, r, fmt.Errorf("decoding %s: %w", vmManifestFile, err), "Cannot read the VM manifest")
		return
	}
	vm["apiVersion"], vm["kind"] = "kubevirt.io/v1", "VirtualMachine"
	if templates := dataVolumeTemplates(vm); len(templates) > 0 {
		exportName, err := s.readManifestFile(exportNameFile)
		if err != nil {
			internalError(w, r, fmt.Errorf("reading the export name: %w", err), "Cannot read the export name")
			return
		}
		for _, t := range templates {
			s.pointAtExport(t, host, caName, headerSecretName(exportName))
		}
	}
	objects = append(objects, vm)
	writeObjects(w, r, objects)
}

// dataVolumeTemplates are the VM's spec.dataVolumeTemplates that are
// objects.
func dataVolumeTemplates(vm map[string]any) []map[string]any {
	spec, _ := vm["spec"].(map[string]any)
	list, _ := spec["dataVolumeTemplates"].([]any)
	var out []map[string]any
	for _, t := range list {
		if m, ok := t.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// pointAtExport makes the DataVolume template t import its claim from
// this export, as KubeVirt does: an HTTP source at https://<host><URI>,
// the gzip URI of the exported volume whose URIs have a path segment
// equal to the template's name (else its raw URI), trusting the CA
// ConfigMap and sending the token from the header Secret. A template
// whose claim is not exported is left alone.
func (s *Server) pointAtExport(t map[string]any, host, caName, secretName string) {
	meta, _ := t["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	uri := s.imageURI(name)
	if uri == "" {
		return
	}
	src := map[string]any{
		"url":                "https://" + path.Join(host, uri),
		"secretExtraHeaders": []any{secretName},
	}
	if caName != "" {
		src["certConfigMap"] = caName
	}
	spec, ok := t["spec"].(map[string]any)
	if !ok {
		spec = map[string]any{}
		t["spec"] = spec
	}
	spec["source"] = map[string]any{"http": src}
}

// imageURI is the URI a DataVolume imports claim from: the exported
// volume's gzip URI, else its raw URI; "" if claim is not exported.
func (s *Server) imageURI(claim string) string {
	if claim == "" {
		return ""
	}
	for _, v := range s.cfg.Volumes {
		named := slices.ContainsFunc(v.uris(), func(u string) bool {
			return slices.Contains(strings.Split(u, "/"), claim)
		})
		switch {
		case !named:
		case v.RawGzipURI != "":
			return v.RawGzipURI
		case v.RawURI != "":
			return v.RawURI
		}
	}
	return ""
}

// serveSecret answers the Secret a CDI DataVolume names in
// secretExtraHeaders to send the token: header-secret-<export name>, with
// stringData.token "x-kubevirt-export-token:<token>".
func (s *Server) serveSecret(w http.ResponseWriter, r *http.Request) {
	token, err := s.token()
	if err != nil {
		internalError(w, r, err, "Cannot read the token")
		return
	}
	exportName, err := s.readManifestFile(exportNameFile)
	if err != nil {
		internalError(w, r, fmt.Errorf("reading the export name: %w", err), "Cannot read the export name")
		return
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: headerSecretName(exportName)},
		StringData: map[string]string{"token": TokenHeader + ":" + token},
	}
	writeObjects(w, r, []any{secret})
}

// readManifestFile is the content of the manifest directory's file name,
// trimmed of surrounding white space.
func (s *Server) readManifestFile(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.cfg.ManifestDir, name))
	return strings.TrimSpace(string(b)), err
}

// writeObjects answers objects as YAML documents, each followed by
// "---\n", when the request accepts application/yaml before
// application/json, else as an indented JSON v1 List.
func writeObjects(w http.ResponseWriter, r *http.Request, objects []any) {
	var buf bytes.Buffer
	contentType := runtime.ContentTypeJSON
	if wantsYAML(r.Header.Values("Accept")) {
		contentType = runtime.ContentTypeYAML
		for _, o := range objects {
			b, err := yaml.Marshal(o)
			if err != nil {
				internalError(w, r, err, "Cannot encode the manifests")
				return
			}
			buf.Write(b)
			buf.WriteString("---\n")
		}
	} else {
		list := corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
		for _, o := range objects {
			b, err := json.Marshal(o)
			if err != nil {
				internalError(w, r, err, "Cannot encode the manifests")
				return
			}
			list.Items = append(list.Items, runtime.RawExtension{Raw: b})
		}
		b, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			internalError(w, r, err, "Cannot encode the manifests")
			return
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	w.Header().Set("Content-Type", contentType)
	if _, err := buf.WriteTo(w); err != nil {
		klog.FromContext(r.Context()).Error(err, "Cannot write the manifests", "path", r.URL.Path)
	}
}

// wantsYAML reports whether the Accept header values name
// application/yaml before application/json (quality values are not
// weighed).
func wantsYAML(accept []string) bool {
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case runtime.ContentTypeYAML:
				return true
			case runtime.ContentTypeJSON:
				return false
			}
		}
	}
	return false
}
