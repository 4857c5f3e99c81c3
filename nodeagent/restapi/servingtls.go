package restapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// ServingTLS names the files of the node agent's serving certificate and
// of the CA bundle its clients' certificates must chain to, as the install
// strategy mounts them from Secrets and a ConfigMap.
type ServingTLS struct {
	// CertFile and KeyFile are the serving certificate and its key.
	CertFile, KeyFile string
	// ClientCAFile is the CA bundle (PEM, one or more CAs) that verifies
	// client certificates; empty: no client certificate is asked for
	// (the metrics endpoint, which Prometheus scrapes without one).
	ClientCAFile string
	// ClientName, when set, is the only subject common name accepted in a
	// client certificate (installstrategy.HandlerClientCommonName, as
	// KubeVirt's virt-handler checks); another name is refused in the
	// handshake even when its CA is trusted.
	ClientName string
}

// Config loads the files and returns a server TLS configuration that
// follows them: a rotated certificate or CA bundle (the kubelet swaps a
// mounted Secret's files in place) is served from the next handshake on,
// without a restart. The files are watched (inotify, and re-read at least
// every minute) by k8s.io/apiserver's dynamiccertificates, the way
// kube-apiserver follows its own certificates, until ctx ends.
func (s ServingTLS) Config(ctx context.Context) (*tls.Config, error) {
	if s.CertFile == "" || s.KeyFile == "" {
		return nil, errors.New("serving TLS: a certificate file and a key file are required")
	}
	cert, err := dynamiccertificates.NewDynamicServingContentFromFiles("serving-cert", s.CertFile, s.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %s: %w", s.CertFile, err)
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.NoClientCert}
	var ca dynamiccertificates.CAContentProvider
	var caFile *dynamiccertificates.DynamicFileCAContent
	if s.ClientCAFile != "" {
		if caFile, err = dynamiccertificates.NewDynamicCAContentFromFile("client-ca", s.ClientCAFile); err != nil {
			return nil, fmt.Errorf("client CA bundle %s: %w", s.ClientCAFile, err)
		}
		ca = caFile
		base.ClientAuth = tls.RequireAndVerifyClientCert
		if s.ClientName != "" {
			base.VerifyPeerCertificate = requireClientName(s.ClientName)
		}
	}
	ctrl := dynamiccertificates.NewDynamicServingCertificateController(base, ca, cert, nil, nil)
	cert.AddListener(ctrl)
	if caFile != nil {
		caFile.AddListener(ctrl)
	}
	if err := ctrl.RunOnce(); err != nil {
		return nil, fmt.Errorf("serving TLS: %w", err)
	}
	go cert.Run(ctx, 1)
	if caFile != nil {
		go caFile.Run(ctx, 1)
	}
	go ctrl.Run(1, ctx.Done())
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: ctrl.GetConfigForClient}, nil
}

// requireClientName refuses a verified client certificate whose subject
// common name is not name. crypto/tls calls it after verifying the chain
// against the current CA bundle.
func requireClientName(name string) func([][]byte, [][]*x509.Certificate) error {
	return func(_ [][]byte, chains [][]*x509.Certificate) error {
		if len(chains) == 0 || len(chains[0]) == 0 {
			return errors.New("no verified client certificate")
		}
		if cn := chains[0][0].Subject.CommonName; cn != name {
			return fmt.Errorf("client certificate common name %q is not %q", cn, name)
		}
		return nil
	}
}

// ClientTLS names the files of a client certificate and of the CA bundle
// that verifies the servers it connects to, as the install strategy mounts
// them from a Secret and a ConfigMap.
type ClientTLS struct {
	// CertFile and KeyFile are the client certificate and its key.
	CertFile, KeyFile string
	// CAFile is the CA bundle (PEM) the server's certificate must chain to.
	CAFile string
	// ServerName is the name the server's certificate must hold
	// (installstrategy.HandlerServerName).
	ServerName string
}

// Config loads the files and returns a client TLS configuration that
// follows them as ServingTLS.Config does: a renewed certificate, or a CA
// bundle that gained the next CA, is used from the next connection on,
// without a restart (the node agent's migration proxy runs for a year).
func (c ClientTLS) Config(ctx context.Context) (*tls.Config, error) {
	if c.CertFile == "" || c.KeyFile == "" || c.CAFile == "" || c.ServerName == "" {
		return nil, errors.New("client TLS: a certificate file, a key file, a CA file and a server name are required")
	}
	pair, err := dynamiccertificates.NewDynamicServingContentFromFiles("client-cert", c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate %s: %w", c.CertFile, err)
	}
	if _, err := currentPair(pair); err != nil {
		return nil, fmt.Errorf("client certificate %s: %w", c.CertFile, err)
	}
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile("server-ca", c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", c.CAFile, err)
	}
	go pair.Run(ctx, 1)
	go ca.Run(ctx, 1)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return currentPair(pair)
		},
		// The chain is verified below, against the bundle as it is now:
		// crypto/tls would verify it against RootCAs, fixed at creation.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			opts, ok := ca.VerifyOptions()
			if !ok {
				return fmt.Errorf("CA bundle %s holds no certificate", c.CAFile)
			}
			opts.DNSName = c.ServerName
			opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			opts.Intermediates = x509.NewCertPool()
			for _, cert := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(cert)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		},
	}, nil
}

// currentPair is the key pair the files hold now.
func currentPair(p *dynamiccertificates.DynamicCertKeyPairContent) (*tls.Certificate, error) {
	certPEM, keyPEM := p.CurrentCertKeyContent()
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}
