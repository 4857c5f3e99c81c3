package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/nodeagent"
)

// migrationFlags are virt-handler's live migration flags.
type migrationFlags struct {
	address                 string
	clientCert, clientKey   string
	bandwidthMiB            uint64
	completionTimeoutPerGiB int64
	progressTimeout         int64
	autoConverge, postCopy  bool
	parallelConnections     int
}

func (m *migrationFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.address, "migration-address", "", "IP address the migration proxy listens on and that other nodes' agents connect to (default: --pod-ip-address; none: this node takes no part in live migrations)")
	fs.StringVar(&m.clientCert, "migration-client-cert-file", "", "client certificate (PEM) the migration proxy presents to other nodes' agents: the installation's virt-handler client certificate (kubevirt-virt-handler-certs)")
	fs.StringVar(&m.clientKey, "migration-client-key-file", "", "key of --migration-client-cert-file")
	fs.Uint64Var(&m.bandwidthMiB, "migration-bandwidth-mib", 0, "bandwidth per migration in MiB/s (the KubeVirt CR's bandwidthPerMigration); 0 is unlimited")
	fs.Int64Var(&m.completionTimeoutPerGiB, "migration-completion-timeout-per-gib", nodeagent.DefaultCompletionTimeoutPerGiB, "abort a migration not completed within this many seconds per GiB of guest memory; negative: never")
	fs.Int64Var(&m.progressTimeout, "migration-progress-timeout", nodeagent.DefaultProgressTimeout, "abort a migration whose data left has not shrunk for this many seconds; 0: never")
	fs.BoolVar(&m.autoConverge, "migration-allow-auto-converge", false, "throttle guests that dirty memory faster than it is sent")
	fs.BoolVar(&m.postCopy, "migration-allow-post-copy", false, "switch a migration past its completion timeout to post-copy instead of aborting it")
	fs.IntVar(&m.parallelConnections, "migration-parallel-connections", 0, "send memory over this many connections (multifd) when above 1")
}

// config is the agent's migration configuration: the proxy's server side
// is the REST API's TLS (serverTLS: the node agent's serving certificate,
// client certificates signed by the CA in caFile), its client side the
// node agent's client certificate with that CA as roots. With --insecure
// (serverTLS nil) only a loopback migration address is allowed.
func (m *migrationFlags) config(podIP string, serverTLS *tls.Config, caFile string) (*nodeagent.MigrationConfig, error) {
	addr := m.address
	if addr == "" {
		addr = podIP
	}
	if addr == "" {
		return nil, nil
	}
	if net.ParseIP(addr) == nil {
		return nil, fmt.Errorf("--migration-address %q is not an IP address", addr)
	}
	cfg := &nodeagent.MigrationConfig{
		Address: addr, BandwidthMiB: m.bandwidthMiB, CompletionTimeoutPerGiB: m.completionTimeoutPerGiB,
		AllowAutoConverge: m.autoConverge, AllowPostCopy: m.postCopy, ParallelConnections: m.parallelConnections,
	}
	if m.completionTimeoutPerGiB == 0 {
		cfg.CompletionTimeoutPerGiB = -1 // 0 given: never (the agent's zero means the default)
	}
	cfg.ProgressTimeout = m.progressTimeout
	if m.progressTimeout == 0 {
		cfg.ProgressTimeout = -1
	}
	if serverTLS == nil {
		return cfg, nil // migrationproxy refuses a non-loopback address without TLS
	}
	if m.clientCert == "" || m.clientKey == "" {
		return nil, errors.New("--migration-client-cert-file and --migration-client-key-file are required with TLS (the installation's virt-handler client certificate), or no --migration-address/--pod-ip-address")
	}
	cert, err := tls.LoadX509KeyPair(m.clientCert, m.clientKey)
	if err != nil {
		return nil, fmt.Errorf("--migration-client-cert-file: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--client-ca-file %s: no certificates", caFile)
	}
	cfg.ServerTLS = serverTLS
	cfg.ClientTLS = &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool,
		ServerName: installstrategy.HandlerServerName, MinVersion: tls.VersionTLS12,
	}
	return cfg, nil
}
