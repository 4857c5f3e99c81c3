package exportserver

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of the Config fields the export controller does not set.
const (
	DefaultListenAddr  = ":8443"
	DefaultManifestDir = "/manifest_data"
)

// Config is what the server serves and how. ConfigFromEnv builds it from
// the exporter pod's environment; tests and embedders fill it directly.
type Config struct {
	// ListenAddr is the TCP address Run listens on; DefaultListenAddr when
	// empty.
	ListenAddr string
	// CertFile and KeyFile are the PEM serving certificate (with its
	// chain) and private key.
	CertFile, KeyFile string
	// TokenFile holds the export token. It is read on each request, so a
	// rotated secret takes effect without a restart.
	TokenFile string
	// Deadline is when Run shuts the server down and returns nil; the zero
	// time means never.
	Deadline time.Time
	// VMURI and SecretURI are the paths, below /internal and /external,
	// of the VirtualMachine's manifests and of the token header Secret;
	// empty means not served.
	VMURI, SecretURI string
	// ManifestDir holds the files the export controller writes from its
	// ConfigMap (virtualmachine-manifest, internal_host, …);
	// DefaultManifestDir when empty.
	ManifestDir string
	// Volumes are the exported claims.
	Volumes []Volume
}

// Volume is one exported claim: its mount point and the URIs that serve
// it. An empty URI is not served.
type Volume struct {
	// Path is the mount point: a directory for a filesystem claim, a
	// block device (or any non-directory file) for a block claim.
	Path string
	// RawURI serves the disk image (Path/disk.img, or Path itself when
	// it is not a directory), with Range support.
	RawURI string
	// RawGzipURI serves the same bytes gzip-compressed.
	RawGzipURI string
	// ArchiveURI serves the directory Path as a gzip-compressed tar.
	ArchiveURI string
	// DirURI serves the files under Path; it ends with a slash.
	DirURI string
}

// uris are v's URIs that are set.
func (v Volume) uris() []string {
	var out []string
	for _, u := range []string{v.RawURI, v.RawGzipURI, v.ArchiveURI, v.DirURI} {
		if u != "" {
			out = append(out, u)
		}
	}
	return out
}

// The exporter pod's environment variables, as KubeVirt's export
// controller sets them.
const (
	envCertFile  = "CERT_FILE"
	envKeyFile   = "KEY_FILE"
	envTokenFile = "TOKEN_FILE"
	envDeadline  = "DEADLINE"
	envVMURI     = "EXPORT_VM_DEF_URI"
	envSecretURI = "EXPORT_SECRET_DEF_URI"

	envVolumePrefix = "VOLUME"
	envPathSuffix   = "_EXPORT_PATH"
)

// volumeURIEnv maps the suffix of a VOLUME<i>_... variable to the field
// of Volume it sets.
var volumeURIEnv = []struct {
	suffix string
	field  func(*Volume) *string
}{
	{"_EXPORT_RAW_URI", func(v *Volume) *string { return &v.RawURI }},
	{"_EXPORT_RAW_GZIP_URI", func(v *Volume) *string { return &v.RawGzipURI }},
	{"_EXPORT_ARCHIVE_URI", func(v *Volume) *string { return &v.ArchiveURI }},
	{"_EXPORT_DIR_URI", func(v *Volume) *string { return &v.DirURI }},
}

// ConfigFromEnv reads the exporter pod's environment (os.Environ's form,
// KEY=value): CERT_FILE, KEY_FILE and TOKEN_FILE (required), DEADLINE
// (RFC 3339, optional), EXPORT_VM_DEF_URI and EXPORT_SECRET_DEF_URI
// (optional), and for each volume i VOLUME<i>_EXPORT_PATH with any of
// VOLUME<i>_EXPORT_RAW_URI, _RAW_GZIP_URI, _ARCHIVE_URI and _DIR_URI.
// Volumes are ordered by i; gaps are allowed. ListenAddr and ManifestDir
// get their defaults. Errors name the variable at fault; New checks the
// URIs themselves.
func ConfigFromEnv(environ []string) (Config, error) {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	cfg := Config{
		ListenAddr:  DefaultListenAddr,
		ManifestDir: DefaultManifestDir,
		CertFile:    env[envCertFile],
		KeyFile:     env[envKeyFile],
		TokenFile:   env[envTokenFile],
		VMURI:       env[envVMURI],
		SecretURI:   env[envSecretURI],
	}
	for _, name := range []string{envCertFile, envKeyFile, envTokenFile} {
		if env[name] == "" {
			return Config{}, fmt.Errorf("%s is not set", name)
		}
	}
	if d := env[envDeadline]; d != "" {
		t, err := time.Parse(time.RFC3339, d)
		if err != nil {
			return Config{}, fmt.Errorf("%s=%q is not an RFC 3339 time: %w", envDeadline, d, err)
		}
		cfg.Deadline = t
	}

	volumes := map[int]*Volume{}
	uriVars := map[int][]string{} // the URI variables set, for errors
	for k, v := range env {
		i, suffix, ok := volumeKey(k)
		if !ok || v == "" {
			continue
		}
		vol := volumes[i]
		if vol == nil {
			vol = &Volume{}
			volumes[i] = vol
		}
		if suffix == envPathSuffix {
			vol.Path = v
			continue
		}
		uriVars[i] = append(uriVars[i], k)
		for _, e := range volumeURIEnv {
			if suffix == e.suffix {
				*e.field(vol) = v
			}
		}
	}
	indices := make([]int, 0, len(volumes))
	for i := range volumes {
		indices = append(indices, i)
	}
	slices.Sort(indices)
	for _, i := range indices {
		vol := volumes[i]
		if vol.Path == "" {
			slices.Sort(uriVars[i])
			return Config{}, fmt.Errorf("%s%d%s is not set, but %s is", envVolumePrefix, i, envPathSuffix, strings.Join(uriVars[i], " and "))
		}
		cfg.Volumes = append(cfg.Volumes, *vol)
	}
	return cfg, nil
}

// volumeKey splits VOLUME<i><suffix> for a suffix the server knows.
func volumeKey(k string) (i int, suffix string, ok bool) {
	rest, ok := strings.CutPrefix(k, envVolumePrefix)
	if !ok {
		return 0, "", false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 6 {
		return 0, "", false
	}
	i, err := strconv.Atoi(rest[:n])
	if err != nil {
		return 0, "", false
	}
	suffix = rest[n:]
	if suffix == envPathSuffix {
		return i, suffix, true
	}
	for _, e := range volumeURIEnv {
		if suffix == e.suffix {
			return i, suffix, true
		}
	}
	return 0, "", false
}
