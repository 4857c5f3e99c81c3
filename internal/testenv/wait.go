package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// waitAPIServer waits until /readyz passes and the "default" namespace, which
// a controller inside kube-apiserver creates shortly after start, exists.
func (e *Env) waitAPIServer(ctx context.Context, apiserver *process) error {
	client, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return fmt.Errorf("kube-apiserver HTTP client: %w", err)
	}
	defer client.CloseIdleConnections()
	if err := waitHealthy(ctx, apiserver, client, e.Config.Host+"/readyz?verbose"); err != nil {
		return err
	}
	return poll(ctx, apiserver, `namespace "default"`, func(ctx context.Context) (bool, string) {
		_, err := e.Kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// waitHealthy polls url until it answers 200 OK.
func waitHealthy(ctx context.Context, p *process, client *http.Client, url string) error {
	return poll(ctx, p, url, func(ctx context.Context) (bool, string) {
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusOK {
			return true, ""
		}
		return false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, failingChecks(body))
	})
}

// poll calls check until it reports done, p exits or ctx ends. The errors
// name what was awaited, say what check last saw and quote p's log.
func poll(ctx context.Context, p *process, what string, check func(context.Context) (bool, string)) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		done, last := check(ctx)
		if done {
			return nil
		}
		select {
		case <-p.done:
			log := tail(p.logPath, logTailLines)
			err := fmt.Errorf("%s exited (%v) while waiting for %s; last lines of %s:\n%s",
				p.name, p.err, what, p.logPath, log)
			if strings.Contains(log, "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("%s: %s not ready: %w (last seen: %s); last lines of %s:\n%s",
				p.name, what, ctx.Err(), last, p.logPath, tail(p.logPath, logTailLines))
		case <-ticker.C:
		}
	}
}

// failingChecks keeps the "[-]name failed" lines of a verbose /readyz body,
// or the whole (short) body if it has none.
func failingChecks(body []byte) string {
	var failed []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "[-]") {
			failed = append(failed, line)
		}
	}
	if len(failed) == 0 {
		return strings.TrimSpace(string(body))
	}
	return strings.Join(failed, "; ")
}
