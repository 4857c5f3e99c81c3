package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Ports of KubeVirt's migration proxy: the destination QEMU's memory stream
// (direct migration) and its NBD server (block migration). Port 0 names the
// destination libvirt's socket.
const (
	DirectMigrationPort = 49152
	BlockMigrationPort  = 49153
)

// MigrationProxyDir is the directory under a launcher's ShareDir that holds
// the migration sockets.
const MigrationProxyDir = "migrationproxy"

// MigrationSocket is the socket at which the source launcher's libvirt and
// QEMU reach the destination of the VMI with the given UID: port 0 for the
// destination libvirt, DirectMigrationPort and BlockMigrationPort for the
// destination QEMU (KubeVirt's <share dir>/migrationproxy/<uid>[-<port>]-source.sock).
// The destination QEMU listens at the same path in the target launcher's
// file system, so the target agent connects there.
func MigrationSocket(shareDir, uid string, port int) string {
	key := uid
	if port != 0 {
		key += "-" + strconv.Itoa(port)
	}
	return filepath.Join(shareDir, MigrationProxyDir, key+"-source.sock")
}

// MigrationTargetInfo is what a launcher prepared as a migration target
// reports, paths as the launcher sees them (the node agent reaches them
// through /proc/<launcher pid>/root).
type MigrationTargetInfo struct {
	// LibvirtSocket is the socket of the launcher's libvirt daemon, which
	// the source's libvirt connects to.
	LibvirtSocket string `json:"libvirtSocket"`
	// ShareDir, EphemeralDiskDir, PrivateDir and ContainerDiskDir are the
	// launcher's directories: the same in every launcher pod; two
	// launchers on one machine differ (see MigrateRequest.PathMap).
	ShareDir         string `json:"shareDir"`
	EphemeralDiskDir string `json:"ephemeralDiskDir"`
	PrivateDir       string `json:"privateDir"`
	ContainerDiskDir string `json:"containerDiskDir"`
	// Domain is the name the incoming domain will have.
	Domain string `json:"domain"`
}

// MigrationStatus is a launcher's record of the VMI's migration, as
// KubeVirt's launcher keeps it in the domain's metadata.
type MigrationStatus struct {
	// UID of the VirtualMachineInstanceMigration.
	UID types.UID `json:"uid,omitempty"`
	// Role is "source" or "target".
	Role string `json:"role"`
	// StartTimestamp and EndTimestamp bound the migration.
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	EndTimestamp   *metav1.Time `json:"endTimestamp,omitempty"`
	// Completed: the guest runs on the target.
	Completed bool `json:"completed,omitempty"`
	// Failed: the migration failed or was aborted; the guest runs on the
	// source.
	Failed bool `json:"failed,omitempty"`
	// FailureReason says why it failed.
	FailureReason string `json:"failureReason,omitempty"`
	// AbortStatus is KubeVirt's: Aborting, Succeeded or Failed, once an
	// abort was asked for.
	AbortStatus string `json:"abortStatus,omitempty"`
	// Mode is PreCopy, or PostCopy once switched (MigrateRequest.Timeout).
	Mode string `json:"mode,omitempty"`
	// DomainDetected (target): the incoming domain exists here.
	DomainDetected bool `json:"domainDetected,omitempty"`
	// Progress is the migration job's last progress (source).
	Progress *hypervisor.MigrationProgress `json:"progress,omitempty"`
}

// Abort statuses (KubeVirt's MigrationAbortStatus).
const (
	AbortInProgress = "Aborting"
	AbortSucceeded  = "Succeeded"
	AbortFailed     = "Failed"
)

// MigrateRequest is the body of PUT /v1/migrate: how the source launcher
// migrates. The destination is always the proxy's sockets under the
// launcher's ShareDir (MigrationSocket).
type MigrateRequest struct {
	// MigrationUID is the VirtualMachineInstanceMigration's UID; a
	// migration is started once per UID.
	MigrationUID types.UID `json:"migrationUID"`
	// BandwidthMiB limits the transfer (MiB/s); 0 is unlimited.
	BandwidthMiB uint64 `json:"bandwidthMiB,omitempty"`
	// AutoConverge, PostCopy, Unsafe and ParallelConnections are the
	// KubeVirt CR's migration settings.
	AutoConverge        bool `json:"autoConverge,omitempty"`
	PostCopy            bool `json:"postCopy,omitempty"`
	Unsafe              bool `json:"unsafe,omitempty"`
	ParallelConnections int  `json:"parallelConnections,omitempty"`
	// PathMap rewrites the source launcher's paths in the domain's
	// definition to the target's (see hypervisor.MigrateOptions.PathMap):
	// empty between launcher pods, which lay their files out alike.
	PathMap map[string]string `json:"pathMap,omitempty"`
	// Timeout is the migration's acceptable completion time (the KubeVirt
	// CR's completionTimeoutPerGiB times the guest's size): past it the
	// migration switches to post-copy when PostCopy allows it, else it is
	// aborted. None when zero.
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// ProgressTimeout aborts the migration when the data left to send has
	// not shrunk for this long (the KubeVirt CR's progressTimeout); none
	// when zero.
	ProgressTimeout metav1.Duration `json:"progressTimeout,omitempty"`
}

// PathMapTo maps the directories of a launcher reported in from (its own
// MigrationTargetInfo-like view) to the target's in to; directories that are
// equal are left out.
func PathMapTo(from, to MigrationTargetInfo) map[string]string {
	m := map[string]string{}
	for _, p := range [][2]string{{from.ShareDir, to.ShareDir}, {from.EphemeralDiskDir, to.EphemeralDiskDir}, {from.PrivateDir, to.PrivateDir}, {from.ContainerDiskDir, to.ContainerDiskDir}} {
		if p[0] != "" && p[1] != "" && p[0] != p[1] {
			m[p[0]] = p[1]
		}
	}
	return m
}

// migrationTargetPath prepares a migration target; it takes as long as a sync.
const migrationTargetPath = "/v1/migration/target"

// PrepareMigrationTarget makes the launcher the target of vmi's migration
// (see launcher.Launcher.PrepareMigrationTarget) and returns where its libvirt and
// directories are.
func (c *Client) PrepareMigrationTarget(ctx context.Context, vmi *v1.VirtualMachineInstance) (MigrationTargetInfo, error) {
	var info MigrationTargetInfo
	err := c.doInto(ctx, http.MethodPut, migrationTargetPath, vmi, &info)
	return info, err
}

// MigrationInfo returns the launcher's directories and libvirt socket.
func (c *Client) MigrationInfo(ctx context.Context) (MigrationTargetInfo, error) {
	var info MigrationTargetInfo
	err := c.doInto(ctx, http.MethodGet, "/v1/migration/info", nil, &info)
	return info, err
}

// Migrate starts the migration of the launcher's domain (see
// launcher.Launcher.Migrate); Status().Migration follows it.
func (c *Client) Migrate(ctx context.Context, req MigrateRequest) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/migrate", req)
}

// AbortMigration aborts the migration under way; the guest stays.
func (c *Client) AbortMigration(ctx context.Context) (Status, error) {
	return c.do(ctx, http.MethodPut, "/v1/migration/abort", nil)
}

// doInto is do for routes that answer with something else than a Status.
func (c *Client) doInto(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout(path))
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://launcher"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorAnswer(resp)
	}
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, out); err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, c.socket, err)
	}
	return nil
}
