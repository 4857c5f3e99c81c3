package main

import (
	"strings"
	"testing"

	"github.com/vmkit/vmkit/nodeagent/restapi"
)

func TestMigrationConfig(t *testing.T) {
	// No address: the node takes no part in migrations.
	if cfg, err := (&migrationFlags{}).config(t.Context(), "", nil); cfg != nil || err != nil {
		t.Errorf("without an address: %+v, %v", cfg, err)
	}
	// --pod-ip-address is the default; --insecure leaves TLS off.
	cfg, err := (&migrationFlags{completionTimeoutPerGiB: 150}).config(t.Context(), "127.0.0.1", nil)
	if err != nil || cfg.Address != "127.0.0.1" || cfg.ServerTLS != nil || cfg.CompletionTimeoutPerGiB != 150 {
		t.Errorf("from the pod IP: %+v, %v", cfg, err)
	}
	if cfg, _ := (&migrationFlags{}).config(t.Context(), "127.0.0.1", nil); cfg.CompletionTimeoutPerGiB >= 0 {
		t.Errorf("--migration-completion-timeout-per-gib=0 gives %d, want no timeout (negative)", cfg.CompletionTimeoutPerGiB)
	}
	if _, err := (&migrationFlags{address: "node-a"}).config(t.Context(), "", nil); err == nil || !strings.Contains(err.Error(), "--migration-address") {
		t.Errorf("a host name: %v", err)
	}
	// With TLS the client certificate and the namespace are required.
	serving := &restapi.ServingTLS{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key", ClientCAFile: "/ca"}
	if _, err := (&migrationFlags{namespace: "kubevirt"}).config(t.Context(), "10.0.0.5", serving); err == nil || !strings.Contains(err.Error(), "--migration-client-cert-file") {
		t.Errorf("TLS without a client certificate: %v", err)
	}
	if _, err := (&migrationFlags{clientCert: "/c.crt", clientKey: "/c.key"}).config(t.Context(), "10.0.0.5", serving); err == nil || !strings.Contains(err.Error(), "--namespace") {
		t.Errorf("TLS without a namespace: %v", err)
	}
	if _, err := (&migrationFlags{clientCert: "/c.crt", clientKey: "/c.key", namespace: "kubevirt"}).config(t.Context(), "10.0.0.5", serving); err == nil || !strings.Contains(err.Error(), "migration listeners") {
		t.Errorf("a missing serving certificate: %v", err)
	}
}
