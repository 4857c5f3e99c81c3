package diskimage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Config disks: a configMap, secret, downwardAPI or serviceAccount volume
// reaches the guest as an ISO 9660 image of the files the pod mounts for
// it, as in KubeVirt's pkg/config.
const (
	// configDiskLabel is the image's volume ID when the volume sets no
	// volumeLabel (KubeVirt's).
	configDiskLabel = "cfgdata"
	// serviceAccountDir is where the kubelet mounts the token of the pod's
	// service account: the launcher pod runs as the service account a
	// serviceAccount volume names.
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// configDisk is one config volume: where its files are mounted and where
// its image goes.
type configDisk struct {
	// what names the source in errors: `configMap "app-config"`.
	what string
	// source is the directory the pod mounts the files at.
	source string
	// iso is the image's path.
	iso string
	// label is the ISO volume ID.
	label string
	// optional: a missing source gives an empty image (a ConfigMap or
	// Secret with optional: true that does not exist).
	optional bool
}

// configDiskOf returns the config disk of vol, false when vol is none. The
// sources are where podtemplate mounts them, under priv (the launcher's
// private directory): config-map/<volume>, secret/<volume> and
// downwardapi/<volume>; the service account's token is read from saDir.
// The images go where domainxml looks for them by default, KubeVirt's
// paths: <priv>/config-map-disks/<volume>.iso, secret-disks/<volume>.iso,
// downwardapi-disks/<volume>.iso and
// service-account-disk/service-account.iso.
func configDiskOf(priv, saDir string, vol *v1.Volume) (configDisk, bool) {
	s := &vol.VolumeSource
	var d configDisk
	switch {
	case s.ConfigMap != nil:
		d = configDisk{
			what:     fmt.Sprintf("configMap %q", s.ConfigMap.Name),
			source:   filepath.Join(priv, "config-map", vol.Name),
			iso:      filepath.Join(priv, "config-map-disks", vol.Name+".iso"),
			label:    s.ConfigMap.VolumeLabel,
			optional: s.ConfigMap.Optional != nil && *s.ConfigMap.Optional,
		}
	case s.Secret != nil:
		d = configDisk{
			what:     fmt.Sprintf("secret %q", s.Secret.SecretName),
			source:   filepath.Join(priv, "secret", vol.Name),
			iso:      filepath.Join(priv, "secret-disks", vol.Name+".iso"),
			label:    s.Secret.VolumeLabel,
			optional: s.Secret.Optional != nil && *s.Secret.Optional,
		}
	case s.DownwardAPI != nil:
		d = configDisk{
			what:   "downwardAPI files",
			source: filepath.Join(priv, "downwardapi", vol.Name),
			iso:    filepath.Join(priv, "downwardapi-disks", vol.Name+".iso"),
			label:  s.DownwardAPI.VolumeLabel,
		}
	case s.ServiceAccount != nil:
		d = configDisk{
			what:   fmt.Sprintf("serviceAccount %q token", s.ServiceAccount.ServiceAccountName),
			source: saDir,
			iso:    filepath.Join(priv, "service-account-disk", "service-account.iso"),
		}
	default:
		return configDisk{}, false
	}
	if d.label == "" {
		d.label = configDiskLabel
	}
	return d, true
}

// write builds the image from the files under d.source.
func (d configDisk) write(ctx context.Context) error {
	var files []isoFile
	if _, err := os.Stat(d.source); errors.Is(err, fs.ErrNotExist) {
		if !d.optional {
			return fmt.Errorf("%s not mounted at %s", d.what, d.source)
		}
	} else if files, err = configFiles(d.source); err != nil {
		return fmt.Errorf("%s mounted at %s: %w", d.what, d.source, err)
	}
	if err := writeISO(ctx, d.iso, d.label, files); err != nil {
		return fmt.Errorf("%s: %w", d.what, err)
	}
	return nil
}

// configFiles reads the files under dir as the pod sees them, following
// symbolic links: a kubelet-projected volume holds each key as a link into
// ..data, itself a link to a ..<timestamp> directory; entries whose names
// start with ".." are the kubelet's and are left out (Kubernetes forbids
// such keys and paths). Keys with paths (a downwardAPI field at
// "podinfo/labels") become directories. Each directory's entries come
// sorted by name.
func configFiles(dir string) ([]isoFile, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("not a directory")
	}
	var files []isoFile
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		// The root and at most isoMaxDepth-1 directories: a deeper tree (or
		// a link loop) would not fit the image.
		if depth >= isoMaxDepth {
			return fmt.Errorf("%s: deeper than %d directory levels", rel, isoMaxDepth)
		}
		entries, err := os.ReadDir(filepath.Join(dir, rel))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue
			}
			name := filepath.ToSlash(filepath.Join(rel, e.Name()))
			p := filepath.Join(dir, name)
			fi, err := os.Stat(p) // through links
			if err != nil {
				return err
			}
			switch {
			case fi.IsDir():
				if err := walk(name, depth+1); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				files = append(files, isoFile{Name: name, Data: b, Mode: fi.Mode()})
			default:
				return fmt.Errorf("%s: not a regular file or directory (%s)", name, fi.Mode().Type())
			}
		}
		return nil
	}
	if err := walk("", 0); err != nil {
		return nil, err
	}
	return files, nil
}

// HasDisk reports whether a disk of vmi uses the volume name. KubeVirt
// builds config images only for such volumes (a volume may instead be
// shared as a filesystem).
func HasDisk(vmi *v1.VirtualMachineInstance, name string) bool {
	for i := range vmi.Spec.Domain.Devices.Disks {
		if vmi.Spec.Domain.Devices.Disks[i].Name == name {
			return true
		}
	}
	return false
}
