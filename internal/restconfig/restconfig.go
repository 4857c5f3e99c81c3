// Package restconfig is the API server client configuration of vmkit's
// binaries: in-cluster, or from a kubeconfig file.
package restconfig

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load reads the kubeconfig file, or the pod's in-cluster configuration
// when kubeconfig is empty, and sets userAgent and, when qps is positive,
// the client-side rate limit (qps, burst).
func Load(kubeconfig, userAgent string, qps float32, burst int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, err
	}
	if userAgent != "" {
		cfg.UserAgent = userAgent
	}
	if qps > 0 {
		cfg.QPS, cfg.Burst = qps, burst
	}
	return cfg, nil
}
