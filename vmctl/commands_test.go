package vmctl

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

const prefix = "/apis/subresources.kubevirt.io/v1/namespaces/"

// TestCommandRequests runs each command against the fake API server and
// checks the one request it sent (method, path, JSON body, credentials)
// and what it printed.
func TestCommandRequests(t *testing.T) {
	halted := v1.RunStrategyHalted
	vms := fake.NewSimpleClientset(&v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1"},
		Spec:       v1.VirtualMachineSpec{RunStrategy: &halted},
	})
	tests := []struct {
		name     string
		args     []string
		answer   string // JSON the server answers with (200)
		method   string
		path     string
		body     string // JSON; "" for no body
		wantOut  string
		contains string // instead of wantOut
	}{
		{name: "start", args: []string{"start", "vm1"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/start", body: `{}`,
			wantOut: "VM vm1 was scheduled to start\n"},
		{name: "start paused dry run", args: []string{"start", "vm1", "--paused", "--dry-run"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/start", body: `{"paused":true,"dryRun":["All"]}`,
			wantOut: "Dry Run execution\nVM vm1 was scheduled to start\n"},
		{name: "start in another namespace", args: []string{"-n", "other", "start", "vm1"},
			method: "PUT", path: prefix + "other/virtualmachines/vm1/start", body: `{}`,
			wantOut: "VM vm1 was scheduled to start\n"},
		{name: "stop", args: []string{"stop", "vm1"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/stop", body: `{}`,
			wantOut: "VM vm1 was scheduled to stop\n"},
		{name: "stop forced", args: []string{"stop", "vm1", "--force", "--grace-period=0"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/stop", body: `{"gracePeriod":0}`,
			wantOut: "VM vm1 was scheduled to stop\n"},
		{name: "stop dry run", args: []string{"stop", "vm1", "--dry-run"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/stop", body: `{"dryRun":["All"]}`,
			wantOut: "Dry Run execution\nVM vm1 was scheduled to stop\n"},
		{name: "restart", args: []string{"restart", "vm1"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/restart", body: `{}`,
			wantOut: "VM vm1 was scheduled to restart\n"},
		{name: "restart forced", args: []string{"restart", "vm1", "--force", "--grace-period", "0"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/restart", body: `{"gracePeriodSeconds":0}`,
			wantOut: "VM vm1 was scheduled to restart\n"},
		{name: "addvolume", args: []string{"addvolume", "vm1", "--volume-name=data"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/addvolume",
			body:    `{"name":"data","disk":{"name":"","disk":{"bus":"scsi"},"serial":"data"},"volumeSource":{"persistentVolumeClaim":{"claimName":"data"}}}`,
			wantOut: "Successfully submitted add volume request to VM vm1 for volume data\n"},
		{name: "addvolume virtio with a disk name", args: []string{"addvolume", "vm1", "--volume-name=data", "--disk-name=scratch", "--bus=virtio", "--cache=none"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/addvolume",
			body:    `{"name":"scratch","disk":{"name":"","disk":{"bus":"virtio"},"serial":"scratch","cache":"none"},"volumeSource":{"persistentVolumeClaim":{"claimName":"data"}}}`,
			wantOut: "Successfully submitted add volume request to VM vm1 for volume data\n"},
		{name: "removevolume", args: []string{"removevolume", "vm1", "--volume-name=data"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/removevolume", body: `{"name":"data"}`,
			wantOut: "Successfully submitted remove volume request to VM vm1 for volume data\n"},
		{name: "migrate dry run", args: []string{"migrate", "vm1", "--dry-run"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/migrate", body: `{"dryRun":["All"]}`,
			wantOut: "Dry Run execution\nVM vm1 was scheduled to migrate\n"},
		{name: "migrate with node selector", args: []string{"migrate", "vm1", "--addedNodeSelector", "zone=a"},
			method: "PUT", path: prefix + "ns1/virtualmachines/vm1/migrate", body: `{"addedNodeSelector":{"zone":"a"}}`,
			wantOut: "VM vm1 was scheduled to migrate\n"},
		{name: "pause vmi", args: []string{"pause", "vmi", "vmi1"},
			method: "PUT", path: prefix + "ns1/virtualmachineinstances/vmi1/pause", body: `{}`,
			wantOut: "VMI vmi1 was scheduled to pause\n"},
		{name: "pause vm pauses its instance", args: []string{"pause", "VirtualMachine", "vm1"},
			method: "PUT", path: prefix + "ns1/virtualmachineinstances/vm1/pause", body: `{}`,
			wantOut: "VMI vm1 was scheduled to pause\n"},
		{name: "unpause vmi dry run", args: []string{"unpause", "vmis", "vmi1", "--dry-run"},
			method: "PUT", path: prefix + "ns1/virtualmachineinstances/vmi1/unpause", body: `{"dryRun":["All"]}`,
			wantOut: "Dry Run execution\nVMI vmi1 was scheduled to unpause\n"},
		{name: "soft reboot", args: []string{"soft-reboot", "vmi1"},
			method: "PUT", path: prefix + "ns1/virtualmachineinstances/vmi1/softreboot",
			wantOut: "VMI vmi1 was scheduled to soft-reboot\n"},
		{name: "reset", args: []string{"reset", "vmi1"},
			method: "PUT", path: prefix + "ns1/virtualmachineinstances/vmi1/reset",
			wantOut: "VMI vmi1 was scheduled to reset\n"},
		{name: "reset in another namespace", args: []string{"reset", "vmi1", "-n", "other"},
			method: "PUT", path: prefix + "other/virtualmachineinstances/vmi1/reset",
			wantOut: "VMI vmi1 was scheduled to reset\n"},
		{name: "guestosinfo", args: []string{"guestosinfo", "vmi1"},
			answer: `{"guestAgentVersion":"8.2","hostname":"guest","os":{"name":"Debian"}}`,
			method: "GET", path: prefix + "ns1/virtualmachineinstances/vmi1/guestosinfo",
			contains: "\"guestAgentVersion\": \"8.2\",\n  \"hostname\": \"guest\""},
		{name: "userlist", args: []string{"userlist", "vmi1"},
			answer: `{"items":[{"userName":"root","loginTime":1700000000.5}]}`,
			method: "GET", path: prefix + "ns1/virtualmachineinstances/vmi1/userlist",
			contains: `"userName": "root"`},
		{name: "fslist", args: []string{"fslist", "vmi1"},
			answer: `{"items":[{"diskName":"vda1","mountPoint":"/","fileSystemType":"ext4","usedBytes":1,"totalBytes":2}]}`,
			method: "GET", path: prefix + "ns1/virtualmachineinstances/vmi1/filesystemlist",
			contains: `"mountPoint": "/"`},
		{name: "version", args: []string{"version"},
			answer: `{"gitVersion":"v1.2.3","gitCommit":"abc","platform":"linux/amd64"}`,
			method: "GET", path: "/apis/subresources.kubevirt.io/v1/version",
			contains: `Server Version: version.Info{GitVersion:"v1.2.3", GitCommit:"abc"`},
		{name: "expand", args: []string{"expand", "--vm", "vm1", "-o", "json"},
			answer: `{"metadata":{"name":"vm1","namespace":"ns1"},"spec":{"runStrategy":"Always"}}`,
			method: "GET", path: prefix + "ns1/virtualmachines/vm1/expand-spec",
			contains: "\"kind\": \"VirtualMachine\",\n  \"apiVersion\": \"kubevirt.io/v1\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t)
			if tc.answer != "" {
				api.setAnswer(answerJSON(http.StatusOK, tc.answer))
			}
			out, errOut, err := api.run(Options{VMClient: vms}, tc.args...)
			if err != nil {
				t.Fatalf("vmctl %v: %v (stderr %q)", tc.args, err, errOut)
			}
			reqs := api.recorded()
			if len(reqs) != 1 {
				t.Fatalf("vmctl %v sent %d requests, want 1: %+v", tc.args, len(reqs), reqs)
			}
			r := reqs[0]
			if r.Method != tc.method || r.Path != tc.path {
				t.Errorf("request %s %s, want %s %s", r.Method, r.Path, tc.method, tc.path)
			}
			if r.Auth != "Bearer "+testToken {
				t.Errorf("Authorization %q, want the kubeconfig's bearer token", r.Auth)
			}
			if tc.body == "" {
				if r.Body != "" {
					t.Errorf("body %q, want none", r.Body)
				}
			} else {
				if r.ContentType != "application/json" {
					t.Errorf("Content-Type %q, want application/json", r.ContentType)
				}
				var got, want any
				if err := json.Unmarshal([]byte(r.Body), &got); err != nil {
					t.Fatalf("body %q is not JSON: %v", r.Body, err)
				}
				_ = json.Unmarshal([]byte(tc.body), &want)
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("body (-want +got):\n%s", d)
				}
			}
			if tc.contains != "" {
				if !strings.Contains(out, tc.contains) {
					t.Errorf("output %q does not contain %q", out, tc.contains)
				}
			} else if out != tc.wantOut {
				t.Errorf("output %q, want %q", out, tc.wantOut)
			}
		})
	}
}

// TestServerErrorsReachTheUser: the server's message and code come through
// to the user and to callers (apierrors predicates).
func TestServerErrorsReachTheUser(t *testing.T) {
	tests := []struct {
		name    string
		code    int
		body    string
		args    []string
		wantErr string
		is      func(error) bool
	}{
		{name: "metav1.Status", code: http.StatusConflict,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"VM is already running","reason":"Conflict","code":409}`,
			args: []string{"start", "vm1"}, wantErr: "error starting VirtualMachine vm1: VM is already running", is: apierrors.IsConflict},
		{name: "code and message", code: http.StatusConflict,
			body: `{"code":409,"message":"Halted does not support manual restart requests"}`,
			args: []string{"restart", "vm1"}, wantErr: "error restarting VirtualMachine vm1: Halted does not support manual restart requests", is: apierrors.IsConflict},
		{name: "plain text", code: http.StatusNotFound, body: "virtualmachineinstance vmi1 not found\n",
			args: []string{"pause", "vmi", "vmi1"}, wantErr: "error pausing VirtualMachineInstance vmi1: virtualmachineinstance vmi1 not found", is: apierrors.IsNotFound},
		{name: "no body", code: http.StatusForbidden,
			args: []string{"soft-reboot", "vmi1"}, wantErr: "error soft rebooting VirtualMachineInstance vmi1: Forbidden", is: apierrors.IsForbidden},
		{name: "reset of a stopped VMI", code: http.StatusBadRequest,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Failed to reset non-running VMI with phase Succeeded: Unable to connect to VirtualMachineInstance because phase is Succeeded instead of Running or Scheduled","reason":"BadRequest","code":400}`,
			args: []string{"reset", "vmi1"}, wantErr: "error resetting VirtualMachineInstance vmi1: Failed to reset non-running VMI with phase Succeeded: Unable to connect to VirtualMachineInstance because phase is Succeeded instead of Running or Scheduled", is: apierrors.IsBadRequest},
		{name: "reset forbidden", code: http.StatusForbidden,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"virtualmachineinstances.subresources.kubevirt.io \"vmi1\" is forbidden: User \"viewer\" cannot update resource \"virtualmachineinstances/reset\" in API group \"subresources.kubevirt.io\" in the namespace \"ns1\"","reason":"Forbidden","code":403}`,
			args: []string{"reset", "vmi1"}, wantErr: `error resetting VirtualMachineInstance vmi1: virtualmachineinstances.subresources.kubevirt.io "vmi1" is forbidden: User "viewer" cannot update resource "virtualmachineinstances/reset" in API group "subresources.kubevirt.io" in the namespace "ns1"`, is: apierrors.IsForbidden},
		{name: "guest agent missing", code: http.StatusBadRequest,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"VMI does not have guest agent connected","reason":"BadRequest","code":400}`,
			args: []string{"guestosinfo", "vmi1"}, wantErr: "error getting guestosinfo of VirtualMachineInstance vmi1: VMI does not have guest agent connected", is: apierrors.IsBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t)
			api.setAnswer(answerJSON(tc.code, tc.body))
			_, _, err := api.run(Options{}, tc.args...)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("vmctl %v: error %v, want %q", tc.args, err, tc.wantErr)
			}
			if !tc.is(err) {
				t.Errorf("error %v does not satisfy the apierrors predicate for %d", err, tc.code)
			}
			var st *apierrors.StatusError
			if !errors.As(err, &st) || st.Status().Code != int32(tc.code) {
				t.Errorf("error %#v does not carry code %d", err, tc.code)
			}
		})
	}
}

// TestCommandLineErrors are refused before anything is sent.
func TestCommandLineErrors(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"stop", "vm1", "--force"}, "must both use --force=true and set --grace-period"},
		{[]string{"restart", "vm1", "--grace-period=0"}, "must both use --force=true and set --grace-period"},
		{[]string{"pause", "pod", "x"}, `unsupported resource type "pod": use vm or vmi`},
		{[]string{"start"}, "accepts 1 arg(s), received 0"},
		{[]string{"expand"}, "a VirtualMachine name must be given with --vm"},
		{[]string{"port-forward", "vmi/x", "70000"}, `port "70000": local port: "70000" is not a port number (0-65535)`},
		{[]string{"port-forward", "--stdio=true", "vmi/x", "22", "23"}, "only one port is supported when forwarding to stdout"},
		{[]string{"scp", "a", "b"}, "exactly one of SOURCE and DESTINATION must be remote: [USER@]TYPE/NAME[/NAMESPACE]:PATH"},
		{[]string{"expose", "vmi", "x", "--name", "s", "--type", "ExternalName"}, "type: ExternalName not supported"},
	}
	for _, tc := range tests {
		api := newFakeAPI(t)
		_, _, err := api.run(Options{}, tc.args...)
		if err == nil || err.Error() != tc.wantErr {
			t.Errorf("vmctl %v: error %v, want %q", tc.args, err, tc.wantErr)
		}
		if n := len(api.recorded()); n != 0 {
			t.Errorf("vmctl %v sent %d requests, want none", tc.args, n)
		}
	}
}

// TestPauseHaltedVM explains why a VM's instance cannot be paused.
func TestPauseHaltedVM(t *testing.T) {
	halted := v1.RunStrategyHalted
	vms := fake.NewSimpleClientset(&v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1"},
		Spec:       v1.VirtualMachineSpec{RunStrategy: &halted},
	})
	api := newFakeAPI(t)
	api.setAnswer(answerJSON(http.StatusNotFound, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"virtualmachineinstances.kubevirt.io \"vm1\" not found","reason":"NotFound","code":404}`))
	_, _, err := api.run(Options{VMClient: vms}, "pause", "vm", "vm1")
	want := "error pausing VirtualMachineInstance vm1: VirtualMachine vm1 is not set to run"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	_, _, err = api.run(Options{VMClient: vms}, "pause", "vm", "nope")
	if err == nil || !strings.Contains(err.Error(), "error getting VirtualMachine nope") || !apierrors.IsNotFound(err) {
		t.Fatalf("pausing a missing VM: error %v, want a NotFound from reading it", err)
	}
}

func TestVersionClientOnly(t *testing.T) {
	api := newFakeAPI(t)
	cv := &VersionInfo{GitVersion: "v9.9.9", GoVersion: "go1.25", Platform: "linux/amd64"}
	out, _, err := api.run(Options{ClientVersion: cv}, "version", "--client", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	want := map[string]any{"clientVersion": map[string]any{
		"gitVersion": "v9.9.9", "gitCommit": "", "gitTreeState": "", "buildDate": "",
		"goVersion": "go1.25", "compiler": "", "platform": "linux/amd64",
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("version --client -o json (-want +got):\n%s", d)
	}
	if n := len(api.recorded()); n != 0 {
		t.Errorf("version --client sent %d requests", n)
	}
	if v := ClientVersion(); v.GoVersion == "" || v.Platform == "" || v.GitVersion == "" {
		t.Errorf("ClientVersion() = %+v, want the toolchain, platform and a version", v)
	}
}

// TestVersionServerError prints the client version and fails with the
// server's error.
func TestVersionServerError(t *testing.T) {
	api := newFakeAPI(t)
	api.setAnswer(answerJSON(http.StatusServiceUnavailable, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}`))
	out, _, err := api.run(Options{}, "version")
	if !strings.HasPrefix(out, "Client Version: version.Info{") {
		t.Errorf("output %q, want the client version first", out)
	}
	if err == nil || !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "failed to get server version: the server is currently unable") {
		t.Errorf("error %v, want the server's 503", err)
	}
}
