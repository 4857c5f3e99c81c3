package livemigration

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	vmfake "github.com/vmkit/vmkit/vmapi/generated/clientset/versioned/fake"
	listers "github.com/vmkit/vmkit/vmapi/generated/listers/vmapi/v1"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fakeBackend is the node agent of node as live migration sees it: the
// launchers that serve their sockets under share (none, unless the test
// runs one), the events it records and the calls it was asked to make.
type fakeBackend struct {
	node  string
	share string // launchers' sockets: <share>/sockets/<VMI UID>/launcher.sock
	rec   *record.FakeRecorder

	mu sync.Mutex
	// noted are the VMIs whose launcher pods were noted, prepared those
	// whose launchers were prepared and wired, launcherErrors the failed
	// launcher calls by operation.
	noted, prepared []string
	launcherErrors  map[string]int
}

var _ Backend = (*fakeBackend)(nil)

func (b *fakeBackend) NodeName() string { return b.node }

func (b *fakeBackend) Launcher(uid types.UID) *client.Client {
	return client.New(client.SocketPath(b.share, string(uid)))
}

func (b *fakeBackend) NoteLauncherPods(vmi *v1.VirtualMachineInstance) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noted = append(b.noted, vmi.Name)
}

func (b *fakeBackend) PrepareLauncher(_ context.Context, vmi *v1.VirtualMachineInstance, _ *client.Client) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prepared = append(b.prepared, vmi.Name)
	return nil
}

func (b *fakeBackend) WireNetwork(context.Context, *v1.VirtualMachineInstance, *client.Client) error {
	return errors.New("fakeBackend: no pod network")
}

func (b *fakeBackend) Eventf(vmi *v1.VirtualMachineInstance, eventType, reason, messageFmt string, args ...any) {
	b.rec.Eventf(vmi, eventType, reason, messageFmt, args...)
}

func (b *fakeBackend) CountLauncherError(op string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.launcherErrors == nil {
		b.launcherErrors = map[string]int{}
	}
	b.launcherErrors[op]++
}

// calls returns the VMIs whose launcher pods were noted and whose
// launchers were prepared, and the failed launcher calls by operation.
func (b *fakeBackend) calls() (noted, prepared []string, launcherErrors map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.noted), slices.Clone(b.prepared), maps.Clone(b.launcherErrors)
}

// events drains the events recorded so far.
func (b *fakeBackend) events() []string {
	var out []string
	for {
		select {
		case e := <-b.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// targetNode02 is a Migrator on node02 (plain TCP on loopback) whose
// API server and migration target informer hold vmi, and its Backend.
func targetNode02(t *testing.T, vmi *v1.VirtualMachineInstance) (*Migrator, *fakeBackend, *vmfake.Clientset) {
	t.Helper()
	vmClient := vmfake.NewSimpleClientset(vmi.DeepCopy())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := indexer.Add(vmi.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{node: "node02", share: t.TempDir(), rec: record.NewFakeRecorder(10)}
	m, err := New(b, Options{Config: &Config{Address: "127.0.0.1"}, Client: vmClient, Targets: listers.NewVirtualMachineInstanceLister(indexer)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, b, vmClient
}

// migratedVMI is ns/vm1, running on node01, whose migration to node02
// ended: completed, or failed.
func migratedVMI(failed bool) *v1.VirtualMachineInstance {
	end := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", UID: "0d4a0f4e-1111-4222-8333-944455550001", Labels: map[string]string{
			v1.NodeNameLabel: "node01", v1.MigrationTargetNodeNameLabel: "node02",
		}},
		Status: v1.VirtualMachineInstanceStatus{
			Phase: v1.Running, NodeName: "node01", EvacuationNodeName: "node01",
			MigrationState: &v1.VirtualMachineInstanceMigrationState{
				MigrationUID: "m1", SourceNode: "node01", TargetNode: "node02",
				Completed: true, Failed: failed, EndTimestamp: &end,
			},
		},
	}
}

// The target of a migration that completed takes the VMI over in one
// write: status.nodeName and the kubevirt.io/nodeName label become its
// node, evacuationNodeName is cleared and the target label goes; a
// Migrated event says where the VMI is now.
func TestTargetTakesOverACompletedMigration(t *testing.T) {
	m, b, vmClient := targetNode02(t, migratedVMI(false))
	again, err := m.SyncTarget(context.Background(), "ns/vm1")
	if err != nil || again != 0 {
		t.Fatalf("SyncTarget = %v, %v; want 0, nil", again, err)
	}
	got, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{v1.NodeNameLabel: "node02"}, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got.Status.NodeName != "node02" || got.Status.EvacuationNodeName != "" {
		t.Errorf("status.nodeName %q, evacuationNodeName %q; want node02 and none", got.Status.NodeName, got.Status.EvacuationNodeName)
	}
	if diff := cmp.Diff([]string{"Normal Migrated The VirtualMachineInstance migrated to node node02."}, b.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if noted, prepared, errs := b.calls(); len(noted)+len(prepared)+len(errs) != 0 {
		t.Errorf("a finished migration noted pods %v, prepared launchers %v, failed calls %v; want none", noted, prepared, errs)
	}
}

// The target of a migration that failed stops its launcher (gone here)
// and drops the target label; the VMI stays the source's.
func TestTargetLeavesAFailedMigration(t *testing.T) {
	m, b, vmClient := targetNode02(t, migratedVMI(true))
	if _, err := m.SyncTarget(context.Background(), "ns/vm1"); err != nil {
		t.Fatalf("SyncTarget: %v", err)
	}
	got, err := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{v1.NodeNameLabel: "node01"}, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got.Status.NodeName != "node01" {
		t.Errorf("status.nodeName %q, want the source's node01", got.Status.NodeName)
	}
	if ev := b.events(); len(ev) != 0 {
		t.Errorf("events %v, want none", ev)
	}
}

// A node agent without Config takes no part in migrations: it is the
// source of none and leaves a VMI it is the target of as it is.
func TestNoConfigNoMigrations(t *testing.T) {
	vmi := migratedVMI(false)
	vmi.Status.MigrationState.Completed, vmi.Status.MigrationState.EndTimestamp = false, nil
	vmClient := vmfake.NewSimpleClientset(vmi.DeepCopy())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := indexer.Add(vmi.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"node01", "node02"} {
		b := &fakeBackend{node: node, share: t.TempDir(), rec: record.NewFakeRecorder(10)}
		m, err := New(b, Options{Client: vmClient, Targets: listers.NewVirtualMachineInstanceLister(indexer)})
		if err != nil {
			t.Fatal(err)
		}
		if m.IsSource(vmi) {
			t.Errorf("%s: the source of a migration without Config", node)
		}
		if again, err := m.SyncTarget(context.Background(), "ns/vm1"); again != 0 || err != nil {
			t.Errorf("%s: SyncTarget = %v, %v; want 0, nil", node, again, err)
		}
		if noted, prepared, _ := b.calls(); len(noted)+len(prepared) != 0 || len(b.events()) != 0 {
			t.Errorf("%s: took part in a migration without Config: noted %v, prepared %v", node, noted, prepared)
		}
	}
	if got, _ := vmClient.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "vm1", metav1.GetOptions{}); !cmp.Equal(got.Status, vmi.Status) {
		t.Errorf("the VMI was written: %+v", got.Status)
	}
}

// Config is checked: a migration address is required, a loopback one
// without TLS, and the node agents' namespace with client TLS (the source
// checks target addresses against their pods).
func TestNewChecksConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  *Config
		want string // in the error; "" for none
	}{
		{&Config{}, "Config.Address is required"},
		{&Config{Address: "10.0.0.1"}, "needs TLS"},
		{&Config{Address: "127.0.0.1", ClientTLS: &tls.Config{}}, "Config.HandlerNamespace is required"},
		{&Config{Address: "127.0.0.1"}, ""},
	} {
		m, err := New(&fakeBackend{node: "node01"}, Options{Config: tc.cfg})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("New with %+v: %v", tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("New with %+v: error %v, want one saying %q", tc.cfg, err, tc.want)
		}
		if m != nil {
			m.Close()
		}
	}
}
