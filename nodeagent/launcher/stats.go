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
