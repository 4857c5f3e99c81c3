// Package webproxy is what "kubectl proxy" serves, for a browser page:
// the API server of a rest.Config on a local port, with the config's
// credentials, refusing requests for other hosts and from pages of other
// origins. vmctl's "console --web" and "vnc --web" open virt-api's web
// console through it.
package webproxy

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/rest"

	"github.com/vmkit/vmkit/vmctl/internal/apiserver"
)

// Proxy is what "kubectl proxy" serves, for a browser page: it forwards
// the requests below /api and /apis to the API server of a rest.Config,
// adding the config's TLS client settings and credentials, WebSocket and
// other protocol upgrades included. The page (virt-api's web console,
// which the API server serves through its aggregation layer) is loaded
// through the proxy and calls the API server with relative URLs, so its
// requests and streams carry the user's kubeconfig credentials.
//
// Whatever reaches the proxy acts on the cluster as the user, so it
// refuses with 403:
//   - requests for a Host other than localhost, 127.0.0.1, [::1] and the
//     hosts it is given, as kubectl proxy does: a page from evil.example,
//     whose name an attacker made resolve to 127.0.0.1 (DNS rebinding),
//     would otherwise be same-origin with the proxy;
//   - requests whose Origin header is not the proxy's own origin: a page
//     from elsewhere may open WebSockets to any address (browsers apply no
//     same-origin policy to them), and it would get the console. (kubectl
//     proxy refuses pods' exec and attach for the same reason.)
//
// Other paths than /api and /apis get 404.
type Proxy struct {
	hosts   map[string]bool
	handler http.Handler
}

// New returns a proxy to the API server of config, answering
// requests for the hosts (names or IP addresses, without port) besides
// localhost's. logf reports requests that could not be proxied.
//
// Like kubectl proxy, it is apimachinery's UpgradeAwareHandler with
// client-go's transport for plain requests and, for upgrades, a
// connection with the config's TLS settings and a request completed by
// client-go's credential wrappers (bearer token or token file, basic auth,
// exec plugins, impersonation). Unlike kubectl proxy, an API server URL
// with a path (an API server behind a path-routing proxy) keeps its path,
// as for every other request vmctl sends.
func New(config *rest.Config, hosts []string, logf func(format string, args ...any)) (*Proxy, error) {
	cfg := rest.CopyConfig(config)
	target, err := apiserver.HostURL(cfg)
	if err != nil {
		return nil, err
	}
	// The handler redirects every GET when the target's path is empty.
	target.Path += "/"
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmctl: transport for %s: %w", cfg.Host, err)
	}
	upgrade, err := upgradeTransport(cfg)
	if err != nil {
		return nil, err
	}
	h := proxy.NewUpgradeAwareHandler(target, rt, false, false, proxyResponder(logf))
	h.UpgradeTransport = upgrade
	h.UseRequestLocation = true
	h.UseLocationHost = true
	h.AppendLocationPath = true

	p := &Proxy{hosts: map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}, handler: h}
	for _, host := range hosts {
		p.hosts[strings.ToLower(strings.Trim(host, "[]"))] = true
	}
	return p, nil
}

// upgradeTransport is the connection of upgraded requests, HTTP/1.1 with
// config's TLS settings and dialer, and what completes their headers with
// config's credentials (kubectl's proxy builds it the same way).
func upgradeTransport(cfg *rest.Config) (proxy.UpgradeRequestRoundTripper, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("vmctl: TLS configuration for %s: %w", cfg.Host, err)
	}
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	conn := utilnet.SetOldTransportDefaults(&http.Transport{TLSClientConfig: tlsConfig, DialContext: dial})
	wrappers, err := rest.HTTPWrappersForConfig(cfg, proxy.MirrorRequest)
	if err != nil {
		return nil, fmt.Errorf("vmctl: credentials for %s: %w", cfg.Host, err)
	}
	return proxy.NewUpgradeRequestRoundTripper(conn, wrappers), nil
}

// ServeHTTP answers r as the comment of Proxy says.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !p.hosts[strings.ToLower(strings.Trim(host, "[]"))] {
		http.Error(w, fmt.Sprintf("vmctl's API proxy does not answer requests for host %q", r.Host), http.StatusForbidden)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) {
		http.Error(w, fmt.Sprintf("vmctl's API proxy does not answer requests from pages of %s", origin), http.StatusForbidden)
		return
	}
	if !underAPI(r.URL.Path) {
		http.Error(w, "vmctl's API proxy serves /api and /apis only", http.StatusNotFound)
		return
	}
	p.handler.ServeHTTP(w, r)
}

// sameOrigin tells whether origin (an Origin header) is the origin of the
// proxy reached as host (the request's Host).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Path == "" && strings.EqualFold(u.Host, host)
}

// underAPI tells whether p, with its dot segments resolved, is /api, /apis
// or below.
func underAPI(p string) bool {
	p = path.Clean("/" + p)
	return p == "/api" || p == "/apis" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/apis/")
}

// proxyResponder answers a request the proxy could not forward with 502
// and the error, and reports it with logf.
type proxyResponder func(format string, args ...any)

func (logf proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	logf("error proxying %s %s: %v", r.Method, r.URL.Path, err)
	http.Error(w, err.Error(), http.StatusBadGateway)
}
