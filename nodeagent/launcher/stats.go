package launcher

import (
	"context"
	"fmt"
	"net/http"

	"github.com/vmkit/vmkit/nodeagent/hypervisor"
)

// Stats returns the statistics of the running (or paused) domain, which
// the node agent turns into KubeVirt's per-VMI metrics when Prometheus
// scrapes it. Before the domain started, or after it ended, it fails with
// hypervisor.ErrInvalidState (errFinal once it ended).
func (l *Launcher) Stats(ctx context.Context) (hypervisor.DomainStats, error) {
	domain, err := l.startedDomain("stats")
	if err != nil {
		return hypervisor.DomainStats{}, err
	}
	st, err := l.h.Stats(ctx, domain)
	if err != nil {
		return hypervisor.DomainStats{}, fmt.Errorf("stats of VMI %s: %w", l.key(), err)
	}
	return st, nil
}

// serveStats answers GET /v1/stats with the domain's statistics.
func (l *Launcher) serveStats(w http.ResponseWriter, r *http.Request) {
	st, err := l.Stats(r.Context())
	if err != nil {
		reply(w, l.Status(), err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// Stats returns the statistics of the launcher's domain (see
// Launcher.Stats); a domain that has not started or has ended is a 409.
// The call is bounded by CallTimeout, or ctx's deadline if sooner.
func (c *Client) Stats(ctx context.Context) (hypervisor.DomainStats, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://launcher/v1/stats", nil)
	if err != nil {
		return hypervisor.DomainStats{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return hypervisor.DomainStats{}, fmt.Errorf("GET /v1/stats on %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return hypervisor.DomainStats{}, errorAnswer(resp)
	}
	var st hypervisor.DomainStats
	if err := decodeAnswer(resp.Body, MaxAnswerBytes, &st); err != nil {
		return hypervisor.DomainStats{}, fmt.Errorf("GET /v1/stats on %s: %w", c.socket, err)
	}
	return st, nil
}
