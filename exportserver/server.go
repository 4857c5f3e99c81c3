package exportserver

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

const (
	// TokenHeader is the request header, and the query parameter, that
	// carries the export token.
	TokenHeader = "x-kubevirt-export-token"
	// ReadinessPath is the readiness probe's path; it needs no token.
	ReadinessPath = "/exportready"

	internalPrefix = "/internal"
	externalPrefix = "/external"

	// shutdownTimeout bounds the graceful shutdown at the deadline:
	// downloads still running after it are cut.
	shutdownTimeout = 5 * time.Second
)

// Server serves one VirtualMachineExport's volumes and manifests. Make it
// with New; Handler is its HTTP handler, Run serves it over TLS.
type Server struct {
	cfg Config
	// exact are the routes matched by the whole path; dirs those matched
	// by a prefix (the volumes' DirURIs), longest prefix first.
	exact map[string]route
	dirs  []route
}

// route is one path the server answers.
type route struct {
	path string
	// kind names the route in logs: raw, gzip, archive, dir, vm, secret,
	// ready.
	kind string
	// public routes need no token and are not logged.
	public bool
	serve  http.HandlerFunc
}

// New checks cfg and builds the server's routes. Every URI must be an
// absolute path, a DirURI must end with a slash and the others must not,
// a volume with a URI must have a Path, and no two routes may share a
// path. cfg.TokenFile is required; the files themselves are read when
// requests come.
func New(cfg Config) (*Server, error) {
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = DefaultListenAddr
	}
	if cfg.ManifestDir == "" {
		cfg.ManifestDir = DefaultManifestDir
	}
	if cfg.TokenFile == "" {
		return nil, errors.New("no token file")
	}
	s := &Server{cfg: cfg, exact: map[string]route{}}
	add := func(r route) error {
		if !strings.HasPrefix(r.path, "/") {
			return fmt.Errorf("%s URI %q is not an absolute path", r.kind, r.path)
		}
		if dir := strings.HasSuffix(r.path, "/"); dir != (r.kind == "dir") {
			if dir {
				return fmt.Errorf("%s URI %q ends with a slash", r.kind, r.path)
			}
			return fmt.Errorf("%s URI %q does not end with a slash", r.kind, r.path)
		}
		if _, dup := s.exact[r.path]; dup || slices.ContainsFunc(s.dirs, func(d route) bool { return d.path == r.path }) {
			return fmt.Errorf("two routes have the path %q", r.path)
		}
		if r.kind == "dir" {
			s.dirs = append(s.dirs, r)
		} else {
			s.exact[r.path] = r
		}
		return nil
	}

	if err := add(route{path: ReadinessPath, kind: "ready", public: true, serve: serveReady}); err != nil {
		return nil, err
	}
	for i, v := range cfg.Volumes {
		if v.Path == "" && len(v.uris()) > 0 {
			return nil, fmt.Errorf("volume %d has URIs but no path", i)
		}
		for _, r := range []route{
			{path: v.RawURI, kind: "raw", serve: func(w http.ResponseWriter, r *http.Request) { serveRaw(w, r, v.Path) }},
			{path: v.RawGzipURI, kind: "gzip", serve: func(w http.ResponseWriter, r *http.Request) { serveGzip(w, r, v.Path) }},
			{path: v.ArchiveURI, kind: "archive", serve: func(w http.ResponseWriter, r *http.Request) { serveArchive(w, r, v.Path) }},
			{path: v.DirURI, kind: "dir", serve: func(w http.ResponseWriter, r *http.Request) { serveDir(w, r, v.DirURI, v.Path) }},
		} {
			if r.path == "" {
				continue
			}
			if err := add(r); err != nil {
				return nil, fmt.Errorf("volume %d (%s): %w", i, v.Path, err)
			}
		}
	}
	for _, u := range []string{cfg.VMURI, cfg.SecretURI} {
		if u != "" && !strings.HasPrefix(u, "/") {
			return nil, fmt.Errorf("manifest URI %q is not an absolute path", u)
		}
	}
	for _, side := range []manifestSide{internalSide, externalSide} {
		if cfg.VMURI != "" {
			if err := add(route{path: side.prefix + cfg.VMURI, kind: "vm", serve: func(w http.ResponseWriter, r *http.Request) { s.serveVM(w, r, side) }}); err != nil {
				return nil, err
			}
		}
		if cfg.SecretURI != "" {
			if err := add(route{path: side.prefix + cfg.SecretURI, kind: "secret", serve: s.serveSecret}); err != nil {
				return nil, err
			}
		}
	}
	slices.SortStableFunc(s.dirs, func(a, b route) int { return len(b.path) - len(a.path) })
	return s, nil
}

// Handler is the server's HTTP handler: the routes of New, 404 for any
// other path, 405 for a method other than GET and HEAD, and 401 for a
// route other than ReadinessPath without the token in the TokenHeader
// header or query parameter.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.lookup(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "only GET and HEAD are allowed", http.StatusMethodNotAllowed)
		return
	}
	if rt.public {
		rt.serve(w, r)
		return
	}
	logger := klog.FromContext(r.Context())
	if err := s.authorize(r); err != nil {
		if errors.Is(err, errUnauthorized) {
			logger.Info("Rejected a request without a valid token", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, "a valid "+TokenHeader+" is required", http.StatusUnauthorized)
			return
		}
		logger.Error(err, "Cannot check the export token", "path", r.URL.Path)
		http.Error(w, "cannot check the export token", http.StatusInternalServerError)
		return
	}
	cw := &countingWriter{ResponseWriter: w, status: http.StatusOK}
	start := time.Now()
	rt.serve(cw, r)
	logger.Info("Served", "route", rt.kind, "method", r.Method, "path", r.URL.Path, "status", cw.status,
		"bytes", cw.n, "duration", time.Since(start).Round(time.Millisecond))
}

// lookup finds the route of path: an exact route, else the longest
// directory route that is a prefix of it.
func (s *Server) lookup(path string) (route, bool) {
	if rt, ok := s.exact[path]; ok {
		return rt, true
	}
	for _, rt := range s.dirs {
		if strings.HasPrefix(path, rt.path) {
			return rt, true
		}
	}
	return route{}, false
}

var errUnauthorized = errors.New("no valid token")

// authorize checks the request's token, from the header or the query
// parameter, against the token file, read now so that a rotated secret
// applies at once.
func (s *Server) authorize(r *http.Request) error {
	want, err := s.token()
	if err != nil {
		return err
	}
	for _, got := range []string{r.Header.Get(TokenHeader), r.URL.Query().Get(TokenHeader)} {
		if got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 {
			return nil
		}
	}
	return errUnauthorized
}

// token is the content of the token file, less one trailing newline (a
// file written by hand or by echo has one; a Secret's key does not).
func (s *Server) token() (string, error) {
	b, err := os.ReadFile(s.cfg.TokenFile)
	if err != nil {
		return "", fmt.Errorf("reading the token: %w", err)
	}
	tok := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if tok == "" {
		return "", fmt.Errorf("the token file %s is empty", s.cfg.TokenFile)
	}
	return tok, nil
}

// Run listens on cfg.ListenAddr and serves until cfg.Deadline or until
// ctx ends: see Serve.
func (s *Server) Run(ctx context.Context) error {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", s.cfg.ListenAddr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve serves Handler over TLS (cfg.CertFile and cfg.KeyFile, TLS 1.2
// or later, HTTP/2) on ln, which it closes. At cfg.Deadline or when ctx
// ends it stops accepting connections, waits a few seconds for running
// downloads and returns nil. It returns an error if the key pair does not
// load or serving fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	cert, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		ln.Close()
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	logger := klog.FromContext(ctx)
	if !s.cfg.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, s.cfg.Deadline)
		defer cancel()
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          klog.NewStandardLogger("INFO"),
		// Requests keep the logger but not the cancellation: at the
		// deadline Shutdown lets running downloads finish.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	logger.Info("Serving the export", "address", ln.Addr().String(), "deadline", s.cfg.Deadline, "volumes", len(s.cfg.Volumes))

	select {
	case err := <-errc:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	logger.Info("Shutting down", "reason", context.Cause(ctx))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Info("Cutting the downloads still running", "err", err)
		srv.Close()
	}
	<-errc // http.ErrServerClosed
	return nil
}

func serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, "OK")
}

// countingWriter counts the bytes of a response and keeps its status,
// for the download log.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
	wrote  bool
}

func (c *countingWriter) WriteHeader(status int) {
	if !c.wrote {
		c.status, c.wrote = status, true
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.wrote = true
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
