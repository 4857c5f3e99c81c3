package restapi

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/vmkit/vmkit/nodeagent/launcher/client"
	"github.com/vmkit/vmkit/nodeagent/network"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// fakeBackend is the node agent as the REST API sees it: the VMIs of node
// in a cache and on an API server (a fake clientset), the launchers that
// serve their sockets under share, the pod networks wired, and the events,
// syncs and launcher errors the API reports.
type fakeBackend struct {
	node   string
	client versioned.Interface
	share  string // launchers' sockets: <share>/sockets/<VMI UID>/launcher.sock
	rec    *record.FakeRecorder

	mu sync.Mutex
	// cache holds VMIs by namespace/name; nil answers NotFound for all.
	cache map[string]*v1.VirtualMachineInstance
	// networks is what the agent wired, by VMI UID.
	networks map[types.UID][]network.Result
	// enqueued are the VMIs the API asked to sync, launcherErrors the
	// failed launcher calls by operation.
	enqueued       []string
	launcherErrors map[string]int
}

var _ Backend = (*fakeBackend)(nil)

func (b *fakeBackend) NodeName() string { return b.node }

func (b *fakeBackend) CachedVMI(namespace, name string) (*v1.VirtualMachineInstance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if vmi, ok := b.cache[namespace+"/"+name]; ok {
		return vmi.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("virtualmachineinstance"), name)
}

func (b *fakeBackend) FreshVMI(ctx context.Context, namespace, name string) (*v1.VirtualMachineInstance, error) {
	return b.client.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (b *fakeBackend) Launcher(uid types.UID) *client.Client {
	return client.New(client.SocketPath(b.share, string(uid)))
}

func (b *fakeBackend) WiredNetwork(_ context.Context, vmi *v1.VirtualMachineInstance, _ int) ([]network.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.networks[vmi.UID]; ok {
		return r, nil
	}
	return nil, errors.New("fakeBackend: the pod network of " + vmi.Name + " was not wired")
}

func (b *fakeBackend) Enqueue(vmi *v1.VirtualMachineInstance) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.enqueued = append(b.enqueued, vmi.Namespace+"/"+vmi.Name)
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

// reported returns the VMIs the API asked to sync and its failed launcher
// calls by operation.
func (b *fakeBackend) reported() (enqueued []string, launcherErrors map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.enqueued), maps.Clone(b.launcherErrors)
}

// setWired records what the agent wired for the VMI with the given UID.
func (b *fakeBackend) setWired(uid types.UID, r []network.Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.networks == nil {
		b.networks = map[types.UID][]network.Result{}
	}
	b.networks[uid] = r
}

// setCached puts vmi in the backend's cache.
func (b *fakeBackend) setCached(vmi *v1.VirtualMachineInstance) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cache == nil {
		b.cache = map[string]*v1.VirtualMachineInstance{}
	}
	b.cache[vmi.Namespace+"/"+vmi.Name] = vmi.DeepCopy()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
