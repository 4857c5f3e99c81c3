package vmctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/version"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
	"github.com/vmkit/vmkit/vmctl/internal/apiserver"
)

const (
	// SubresourcesGroup and SubresourcesVersion are the API group and
	// version of KubeVirt's subresource API, which virt-api serves behind
	// the Kubernetes API server's aggregation layer.
	SubresourcesGroup   = "subresources.kubevirt.io"
	SubresourcesVersion = "v1"
	// SubresourcesPrefix is the path every subresource request starts with.
	SubresourcesPrefix = "/apis/" + SubresourcesGroup + "/" + SubresourcesVersion

	// PlainStreamProtocol is the WebSocket subprotocol of the console, VNC
	// and port-forward streams: binary messages carrying raw bytes both ways.
	PlainStreamProtocol = "plain.kubevirt.io"
)

// VersionInfo is what GET /apis/subresources.kubevirt.io/v1/version returns
// and what vmctl reports about itself, with the JSON names of KubeVirt's
// version.Info.
type VersionInfo = version.Info

// Subresources is a client of KubeVirt's subresource API
// (subresources.kubevirt.io/v1): the state changes of VirtualMachines
// (start, stop, restart, migrate), the operations on running
// VirtualMachineInstances (pause, soft reboot, file system freeze, guest
// agent queries) and their console, VNC and port-forward streams. Requests
// go through the Kubernetes API server named by the rest.Config, with its
// TLS settings and credentials.
//
// Errors the server answers with (a metav1.Status, or a JSON {code,
// message}, or plain text) are returned as *apierrors.StatusError with the
// server's message and HTTP code, so apierrors.IsConflict, IsNotFound and
// friends work on them.
//
// A Subresources is safe for concurrent use.
type Subresources struct {
	config *rest.Config
	client *http.Client
	host   *url.URL
}

// NewSubresources returns a client of the subresource API of the cluster
// config points at.
func NewSubresources(config *rest.Config) (*Subresources, error) {
	if config == nil {
		return nil, fmt.Errorf("vmctl: NewSubresources needs a rest.Config")
	}
	cfg := rest.CopyConfig(config)
	host, err := apiserver.HostURL(cfg)
	if err != nil {
		return nil, err
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmctl: HTTP client for %s: %w", cfg.Host, err)
	}
	return &Subresources{config: cfg, client: client, host: host}, nil
}

// url is the API server URL of a subresource path (below
// SubresourcesPrefix), each element escaped.
func (s *Subresources) url(elems ...string) *url.URL {
	u := *s.host
	escaped := make([]string, len(elems))
	for i, e := range elems {
		escaped[i] = url.PathEscape(e)
	}
	u.Path = s.host.Path + SubresourcesPrefix + "/" + strings.Join(elems, "/")
	u.RawPath = s.host.EscapedPath() + SubresourcesPrefix + "/" + strings.Join(escaped, "/")
	return &u
}

func vmPath(namespace, name string, sub ...string) []string {
	return append([]string{"namespaces", namespace, "virtualmachines", name}, sub...)
}

func vmiPath(namespace, name string, sub ...string) []string {
	return append([]string{"namespaces", namespace, "virtualmachineinstances", name}, sub...)
}

// Start asks for VirtualMachine namespace/name to start (PUT
// .../virtualmachines/{name}/start).
func (s *Subresources) Start(ctx context.Context, namespace, name string, opts v1.StartOptions) error {
	return s.do(ctx, http.MethodPut, vmPath(namespace, name, "start"), &opts, nil)
}

// Stop asks for VirtualMachine namespace/name to stop (PUT
// .../virtualmachines/{name}/stop).
func (s *Subresources) Stop(ctx context.Context, namespace, name string, opts v1.StopOptions) error {
	return s.do(ctx, http.MethodPut, vmPath(namespace, name, "stop"), &opts, nil)
}

// Restart asks for VirtualMachine namespace/name to restart (PUT
// .../virtualmachines/{name}/restart).
func (s *Subresources) Restart(ctx context.Context, namespace, name string, opts v1.RestartOptions) error {
	return s.do(ctx, http.MethodPut, vmPath(namespace, name, "restart"), &opts, nil)
}

// Migrate asks for VirtualMachine namespace/name's instance to be live
// migrated (PUT .../virtualmachines/{name}/migrate).
func (s *Subresources) Migrate(ctx context.Context, namespace, name string, opts v1.MigrateOptions) error {
	return s.do(ctx, http.MethodPut, vmPath(namespace, name, "migrate"), &opts, nil)
}

// ExpandSpec returns VirtualMachine namespace/name as its instance would
// run, instance type and preference applied (GET
// .../virtualmachines/{name}/expand-spec).
func (s *Subresources) ExpandSpec(ctx context.Context, namespace, name string) (*v1.VirtualMachine, error) {
	vm := &v1.VirtualMachine{}
	if err := s.do(ctx, http.MethodGet, vmPath(namespace, name, "expand-spec"), nil, vm); err != nil {
		return nil, err
	}
	return vm, nil
}

// Pause pauses VirtualMachineInstance namespace/name's vCPUs (PUT
// .../virtualmachineinstances/{name}/pause).
func (s *Subresources) Pause(ctx context.Context, namespace, name string, opts v1.PauseOptions) error {
	return s.do(ctx, http.MethodPut, vmiPath(namespace, name, "pause"), &opts, nil)
}

// Unpause resumes a paused VirtualMachineInstance (PUT
// .../virtualmachineinstances/{name}/unpause).
func (s *Subresources) Unpause(ctx context.Context, namespace, name string, opts v1.UnpauseOptions) error {
	return s.do(ctx, http.MethodPut, vmiPath(namespace, name, "unpause"), &opts, nil)
}

// SoftReboot asks the guest of VirtualMachineInstance namespace/name to
// reboot (PUT .../virtualmachineinstances/{name}/softreboot, no body).
func (s *Subresources) SoftReboot(ctx context.Context, namespace, name string) error {
	return s.do(ctx, http.MethodPut, vmiPath(namespace, name, "softreboot"), nil, nil)
}

// Reset resets the guest of VirtualMachineInstance namespace/name at once,
// like a computer's reset button (PUT .../virtualmachineinstances/{name}/reset,
// no body).
func (s *Subresources) Reset(ctx context.Context, namespace, name string) error {
	return s.do(ctx, http.MethodPut, vmiPath(namespace, name, "reset"), nil, nil)
}

// Freeze freezes the guest's file systems through its guest agent; they
// thaw by themselves after unfreezeTimeout unless Unfreeze comes first
// (PUT .../virtualmachineinstances/{name}/freeze).
func (s *Subresources) Freeze(ctx context.Context, namespace, name string, unfreezeTimeout time.Duration) error {
	body := &v1.FreezeUnfreezeTimeout{UnfreezeTimeout: &metav1.Duration{Duration: unfreezeTimeout}}
	return s.do(ctx, http.MethodPut, vmiPath(namespace, name, "freeze"), body, nil)
}

// Unfreeze thaws the guest's file systems (PUT
// .../virtualmachineinstances/{name}/unfreeze, no body).
func (s *Subresources) Unfreeze(ctx context.Context, namespace, name string) error {
	return s.do(ctx, http.MethodPut, vmiPath(namespace, name, "unfreeze"), nil, nil)
}

// GuestOSInfo returns what the guest agent of VirtualMachineInstance
// namespace/name reports (GET .../virtualmachineinstances/{name}/guestosinfo).
func (s *Subresources) GuestOSInfo(ctx context.Context, namespace, name string) (*v1.VirtualMachineInstanceGuestAgentInfo, error) {
	info := &v1.VirtualMachineInstanceGuestAgentInfo{}
	if err := s.do(ctx, http.MethodGet, vmiPath(namespace, name, "guestosinfo"), nil, info); err != nil {
		return nil, err
	}
	return info, nil
}

// UserList returns the users logged in to the guest (GET
// .../virtualmachineinstances/{name}/userlist).
func (s *Subresources) UserList(ctx context.Context, namespace, name string) (*v1.VirtualMachineInstanceGuestOSUserList, error) {
	list := &v1.VirtualMachineInstanceGuestOSUserList{}
	if err := s.do(ctx, http.MethodGet, vmiPath(namespace, name, "userlist"), nil, list); err != nil {
		return nil, err
	}
	return list, nil
}

// FileSystemList returns the guest's mounted file systems (GET
// .../virtualmachineinstances/{name}/filesystemlist).
func (s *Subresources) FileSystemList(ctx context.Context, namespace, name string) (*v1.VirtualMachineInstanceFileSystemList, error) {
	list := &v1.VirtualMachineInstanceFileSystemList{}
	if err := s.do(ctx, http.MethodGet, vmiPath(namespace, name, "filesystemlist"), nil, list); err != nil {
		return nil, err
	}
	return list, nil
}

// Version returns the version of the server side (GET
// /apis/subresources.kubevirt.io/v1/version).
func (s *Subresources) Version(ctx context.Context) (*VersionInfo, error) {
	info := &VersionInfo{}
	if err := s.do(ctx, http.MethodGet, []string{"version"}, nil, info); err != nil {
		return nil, err
	}
	return info, nil
}

// checkNames refuses names that would not name an object ("", ".", "..",
// which would change the path's meaning).
func checkNames(elems []string) error {
	for _, e := range elems {
		if e == "" || e == "." || e == ".." {
			return fmt.Errorf("vmctl: invalid name or namespace %q in %s", e, strings.Join(elems, "/"))
		}
	}
	return nil
}

// do sends one request with body (JSON, when not nil) and decodes a
// successful answer into out (when not nil).
func (s *Subresources) do(ctx context.Context, method string, elems []string, body, out any) error {
	if err := checkNames(elems); err != nil {
		return err
	}
	u := s.url(elems...)
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("vmctl: encoding the body of %s %s: %w", method, u.Path, err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return fmt.Errorf("vmctl: %s %s: %w", method, u.Path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err // a *url.Error, naming the method and URL
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, apiserver.MaxErrorBody))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return apiserver.ResponseError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("vmctl: decoding the answer to %s %s: %w", method, u.Path, err)
	}
	return nil
}

// PortForwardPath is the stream subresource of a port of a
// VirtualMachineInstance: "portforward/{port}", or
// "portforward/{port}/{protocol}" for a protocol other than TCP.
func PortForwardPath(port int, protocol string) string {
	p := "portforward/" + strconv.Itoa(port)
	if protocol = strings.ToLower(protocol); protocol != "" && protocol != "tcp" {
		p += "/" + protocol
	}
	return p
}

// cleanSubresource checks a stream subresource ("console", "vnc",
// "portforward/22", "portforward/53/udp") and splits it into path elements.
func cleanSubresource(sub string) ([]string, error) {
	if sub == "" || path.Clean(sub) != sub || strings.HasPrefix(sub, "/") || strings.HasPrefix(sub, "..") {
		return nil, fmt.Errorf("vmctl: invalid stream subresource %q", sub)
	}
	return strings.Split(sub, "/"), nil
}
