package network

import (
	"context"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/nodeagent/network/dhcp"
)

// Advertisers runs the IPv6 router advertisements (Advertise) of launcher
// pods, one set per key (the node agent's: a VMI's UID), on every wired
// interface with an IPv6 lease. The zero value is ready to use.
//
// A set ends when it is stopped, when the launcher process behind its
// namespace path goes (checked every WatchInterval: the advertisements'
// thread would keep the pod's network namespace alive), or with StopAll.
type Advertisers struct {
	// WatchInterval is how often a launcher is checked; 0 is
	// LauncherWatchInterval.
	WatchInterval time.Duration

	mu      sync.Mutex
	running map[string]*advertiser
}

// LauncherWatchInterval is how often Advertisers checks that a launcher it
// advertises for still runs.
const LauncherWatchInterval = 10 * time.Second

// advertiser is one key's advertisements.
type advertiser struct{ cancel context.CancelFunc }

// Start sends the advertisements of wired's IPv6 leases in the network
// namespace at nsPath (/proc/<launcher pid>/ns/net). It does nothing when
// none has a lease or key's already run.
func (a *Advertisers) Start(key, nsPath string, wired []Result, log klog.Logger) {
	var leased []Result
	for _, r := range wired {
		if r.Lease6 != nil {
			leased = append(leased, r)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.running[key]; ok || len(leased) == 0 {
		return
	}
	if a.running == nil {
		a.running = map[string]*advertiser{}
	}
	interval := a.WatchInterval
	if interval <= 0 {
		interval = LauncherWatchInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	me := &advertiser{cancel: cancel}
	a.running[key] = me
	go func() {
		defer func() {
			cancel()
			a.mu.Lock()
			if a.running[key] == me {
				delete(a.running, key)
			}
			a.mu.Unlock()
		}()
		before, err := os.Stat(nsPath)
		for err == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
			var now os.FileInfo
			if now, err = os.Stat(nsPath); err == nil && !os.SameFile(before, now) {
				return
			}
		}
	}()
	for _, r := range leased {
		log := log.WithValues("interface", r.Interface, "device", r.Lease6.ServerInterface)
		go func(lease dhcp.Lease6) {
			log.V(2).Info("sending IPv6 router advertisements")
			if err := Advertise(klog.NewContext(ctx, log), nsPath, lease); err != nil {
				log.Error(err, "IPv6 router advertisements stopped: the guest gets no IPv6 default route or DHCPv6 address")
			}
		}(*r.Lease6)
	}
}

// Running reports whether key's advertisements run.
func (a *Advertisers) Running(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.running[key]
	return ok
}

// Stop ends key's advertisements.
func (a *Advertisers) Stop(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if adv, ok := a.running[key]; ok {
		adv.cancel()
		delete(a.running, key)
	}
}

// StopAll ends every key's advertisements.
func (a *Advertisers) StopAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, adv := range a.running {
		adv.cancel()
		delete(a.running, key)
	}
}
