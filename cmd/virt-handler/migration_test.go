package main

import (
	"crypto/tls"
	"strings"
	"testing"
)

func TestMigrationConfig(t *testing.T) {
	// No address: the node takes no part in migrations.
	if cfg, err := (&migrationFlags{}).config("", nil, ""); cfg != nil || err != nil {
		t.Errorf("without an address: %+v, %v", cfg, err)
	}
	// --pod-ip-address is the default; --insecure leaves TLS off.
	cfg, err := (&migrationFlags{completionTimeoutPerGiB: 150}).config("127.0.0.1", nil, "")
	if err != nil || cfg.Address != "127.0.0.1" || cfg.ServerTLS != nil || cfg.CompletionTimeoutPerGiB != 150 {
		t.Errorf("from the pod IP: %+v, %v", cfg, err)
	}
	if cfg, _ := (&migrationFlags{}).config("127.0.0.1", nil, ""); cfg.CompletionTimeoutPerGiB >= 0 {
		t.Errorf("--migration-completion-timeout-per-gib=0 gives %d, want no timeout (negative)", cfg.CompletionTimeoutPerGiB)
	}
	if _, err := (&migrationFlags{address: "node-a"}).config("", nil, ""); err == nil || !strings.Contains(err.Error(), "--migration-address") {
		t.Errorf("a host name: %v", err)
	}
	// With TLS the client certificate is required.
	if _, err := (&migrationFlags{}).config("10.0.0.5", &tls.Config{}, "/ca"); err == nil || !strings.Contains(err.Error(), "--migration-client-cert-file") {
		t.Errorf("TLS without a client certificate: %v", err)
	}
	if _, err := (&migrationFlags{clientCert: "/nonexistent.crt", clientKey: "/nonexistent.key"}).config("10.0.0.5", &tls.Config{}, "/ca"); err == nil || !strings.Contains(err.Error(), "--migration-client-cert-file") {
		t.Errorf("a missing client certificate: %v", err)
	}
}
