package restconfig

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoad(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(kubeconfig, "vmkit-test", 100, 200)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t" || cfg.UserAgent != "vmkit-test" || cfg.QPS != 100 || cfg.Burst != 200 {
		t.Errorf("Load = host %q token %q agent %q qps %v burst %d", cfg.Host, cfg.BearerToken, cfg.UserAgent, cfg.QPS, cfg.Burst)
	}
	if cfg, err = Load(kubeconfig, "", 0, 0); err != nil || cfg.QPS != 0 || cfg.UserAgent != "" {
		t.Errorf("without agent and limit: %+v, %v; want client-go's defaults", cfg, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), "", 0, 0); err == nil {
		t.Error("a missing kubeconfig: no error")
	}
}
