// Package exportserver is the server of a VirtualMachineExport's exporter
// pod (KubeVirt's virt-exportserver): it serves the exported claims' disk
// images and files, and the VirtualMachine's manifests, over HTTPS to
// whoever holds the export's token — virtctl vmexport download, CDI
// DataVolumes importing the VM in another cluster, curl — either through
// the export's Service (the internal links of the export's status) or,
// on KubeVirt, through virt-exportproxy behind an Ingress or Route (the
// external links; vmkit runs no export proxy and reports none).
// cmd/virt-exportserver runs it.
//
// # Environment
//
// The export controller renders the pod, so it is the only other party
// to this contract, which is KubeVirt v1.8's (ConfigFromEnv reads it):
//
//	CERT_FILE, KEY_FILE      the TLS serving pair (PEM)
//	TOKEN_FILE               the token; read on each request, so a rotated Secret applies at once
//	DEADLINE                 RFC 3339; the server shuts down then (optional)
//	EXPORT_VM_DEF_URI        e.g. /manifests/all (optional)
//	EXPORT_SECRET_DEF_URI    e.g. /manifests/secret (optional)
//	VOLUME<i>_EXPORT_PATH    volume i's mount point: a directory, or a block device
//	VOLUME<i>_EXPORT_RAW_URI       e.g. /volumes/<claim>/disk.img
//	VOLUME<i>_EXPORT_RAW_GZIP_URI  e.g. /volumes/<claim>/disk.img.gz
//	VOLUME<i>_EXPORT_ARCHIVE_URI   e.g. /volumes/<claim>/disk.tar.gz
//	VOLUME<i>_EXPORT_DIR_URI       e.g. /volumes/<claim>/dir/
//
// The server listens on :8443 and reads the files the controller mounts
// from a ConfigMap at /manifest_data: virtualmachine-manifest (the VM,
// JSON), export-name, internal_host and internal_ca_cm (a ConfigMap,
// JSON), and, when the export has an Ingress or Route, external_host and
// external_ca_cm.
//
// # Routes
//
// Every route but the readiness probe (GET /exportready) needs the token,
// in the x-kubevirt-export-token header or query parameter; without it
// the answer is 401. Methods other than GET and HEAD get 405, unknown
// paths 404.
//
//   - The raw URI serves the image: <path>/disk.img for a directory, else
//     the device itself, with ranges.
//   - The gzip URI streams the same bytes gzip-compressed.
//   - The archive URI streams the directory as a tar.gz (./… names,
//     without lost+found).
//   - The dir URI serves the directory's files and listings.
//   - /internal<VM URI> and /external<VM URI> serve the CA ConfigMap and
//     the VirtualMachine, its dataVolumeTemplates' sources pointed at this
//     export's gzip (else raw) URI on that side's host, with the CA
//     ConfigMap and the header Secret; 404 when the side has no host file.
//   - /internal<secret URI> and /external<secret URI> serve the Secret
//     header-secret-<export name>, whose stringData.token is
//     "x-kubevirt-export-token:<token>", for a DataVolume's
//     secretExtraHeaders.
//
// Manifests are an indented JSON v1 List, or with Accept: application/yaml
// YAML documents each followed by "---\n". Each download is logged (route,
// path, status, bytes, duration), never the token.
//
// # Differences from KubeVirt's virt-exportserver
//
//   - Archives are written in Go (archive/tar, compress/gzip) instead of
//     by /usr/bin/tar, which the image does not have; sparse files are
//     stored whole (no tar -S), which gzip shrinks. Compression is the
//     standard library's, single-threaded at its fastest level, instead
//     of pgzip.
//   - Symbolic links are never followed out of a filesystem claim: the
//     raw and gzip images, the archive and the dir route all open files
//     through os.Root (KubeVirt guards only the dir route).
//   - An empty or unreadable token file rejects every request (500)
//     instead of matching a request without a token; the file may end
//     with a newline.
//   - HEAD works on every route; other methods get 405 with Allow
//     instead of 400 (or, for the raw image, being served).
//   - Accept is parsed as media types (application/yaml before
//     application/json picks YAML) instead of compared as a string.
//   - dataVolumeTemplates are matched to volumes by the claim's name in
//     the URIs instead of by position; the CA ConfigMap is optional; the
//     DataVolume manifests of dv-<name> files and VirtualMachineTemplate
//     manifests are not served.
//   - At the deadline running downloads get five seconds to finish,
//     instead of as long as they take; a serving error is returned
//     instead of a panic, and unreadable volumes fail their requests
//     instead of stopping the server at start.
//   - Not served: OCI image export, changed-block backup (the NBD tunnel
//     and its client certificates); TLS is 1.2 or later with Go's cipher
//     suites, not the cluster's TLS profile.
package exportserver
