package delegatedauth

import (
	"crypto/tls"
	"fmt"
	"net"

	"k8s.io/client-go/util/cert"
)

// SelfSignedTLS is a TLS configuration serving a certificate made in memory
// for host and the other names (DNS names or IP addresses), signed by a CA
// made with it and valid for a year: what kube-controller-manager serves
// when it is given no certificate. Nobody can verify it; clients that
// scrape metrics skip verification (Prometheus's insecureSkipVerify, as for
// kube-controller-manager and KubeVirt) and send only a token the API
// server issued them. A new one is made at every start. It asks clients for
// a certificate without requiring one (see RequestClientCertificates).
func SelfSignedTLS(host string, names ...string) (*tls.Config, error) {
	var ips []net.IP
	var dns []string
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else if n != "" {
			dns = append(dns, n)
		}
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, ips, dns)
	if err != nil {
		return nil, fmt.Errorf("delegatedauth: self-signed certificate for %s: %w", host, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("delegatedauth: self-signed certificate for %s: %w", host, err)
	}
	return RequestClientCertificates(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}), nil
}

// RequestClientCertificates returns cfg asking every client for a
// certificate, which the Guard then verifies against the cluster's client
// CA; a client without one may still present a token. A cfg that picks its
// configuration per client (GetConfigForClient, e.g. one following rotated
// certificate files) asks in each configuration it picks.
func RequestClientCertificates(cfg *tls.Config) *tls.Config {
	out := cfg.Clone()
	out.ClientAuth = tls.RequestClientCert
	if pick := cfg.GetConfigForClient; pick != nil {
		out.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := pick(hello)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone()
			c.ClientAuth = tls.RequestClientCert
			return c, nil
		}
	}
	return out
}
