package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/vmkit/vmkit/installstrategy"
	"github.com/vmkit/vmkit/nodeagent/livemigration"
	"github.com/vmkit/vmkit/nodeagent/restapi"
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
	namespace               string
}

func (m *migrationFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.address, "migration-address", "", "IP address the migration proxy listens on and that other nodes' agents connect to (default: --pod-ip-address; none: this node takes no part in live migrations)")
	fs.StringVar(&m.clientCert, "migration-client-cert-file", "", "client certificate (PEM) the migration proxy presents to other nodes' agents: the installation's migration proxy certificate (kubevirt-virt-handler-migration-certs)")
	fs.StringVar(&m.namespace, "namespace", inClusterNamespace(), "namespace of the virt-handler pods, whose IPs are the only migration targets a source connects to (default: this pod's)")
	fs.StringVar(&m.clientKey, "migration-client-key-file", "", "key of --migration-client-cert-file")
	fs.Uint64Var(&m.bandwidthMiB, "migration-bandwidth-mib", 0, "bandwidth per migration in MiB/s (the KubeVirt CR's bandwidthPerMigration); 0 is unlimited")
	fs.Int64Var(&m.completionTimeoutPerGiB, "migration-completion-timeout-per-gib", livemigration.DefaultCompletionTimeoutPerGiB, "abort a migration not completed within this many seconds per GiB of guest memory; negative: never")
	fs.Int64Var(&m.progressTimeout, "migration-progress-timeout", livemigration.DefaultProgressTimeout, "abort a migration whose data left has not shrunk for this many seconds; 0: never")
	fs.BoolVar(&m.autoConverge, "migration-allow-auto-converge", false, "throttle guests that dirty memory faster than it is sent")
	fs.BoolVar(&m.postCopy, "migration-allow-post-copy", false, "switch a migration past its completion timeout to post-copy instead of aborting it")
	fs.IntVar(&m.parallelConnections, "migration-parallel-connections", 0, "send memory over this many connections (multifd) when above 1")
}

// config is the agent's migration configuration. With TLS (serving not
// nil) the proxy's listeners serve the node agent's serving certificate and
// accept only the migration proxy's client certificate
// (installstrategy.MigrationClientCommonName, which the REST API refuses),
// and the proxy presents that certificate, verifying the other agent
// against the CA bundle; all of these files are followed as the kubelet
// rotates them. The node agent pods are looked up in --namespace to check
// target addresses. With --insecure (serving nil) only a loopback
// migration address is allowed.
func (m *migrationFlags) config(ctx context.Context, podIP string, serving *restapi.ServingTLS) (*livemigration.Config, error) {
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
	cfg := &livemigration.Config{
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
	if serving == nil {
		return cfg, nil // migrationproxy refuses a non-loopback address without TLS
	}
	if m.clientCert == "" || m.clientKey == "" {
		return nil, errors.New("--migration-client-cert-file and --migration-client-key-file are required with TLS (the migration proxy's client certificate), or no --migration-address/--pod-ip-address")
	}
	if m.namespace == "" {
		return nil, errors.New("--namespace is required with TLS: target addresses are checked against the virt-handler pods there")
	}
	listeners := *serving
	listeners.ClientName = installstrategy.MigrationClientCommonName
	var err error
	if cfg.ServerTLS, err = listeners.Config(ctx); err != nil {
		return nil, fmt.Errorf("migration listeners: %w", err)
	}
	client := restapi.ClientTLS{CertFile: m.clientCert, KeyFile: m.clientKey, CAFile: serving.ClientCAFile, ServerName: installstrategy.HandlerServerName}
	if cfg.ClientTLS, err = client.Config(ctx); err != nil {
		return nil, fmt.Errorf("--migration-client-cert-file: %w", err)
	}
	cfg.HandlerNamespace = m.namespace
	return cfg, nil
}

// inClusterNamespace is the namespace of the pod's service account, where
// the install strategy runs virt-handler; "" outside a pod.
func inClusterNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
