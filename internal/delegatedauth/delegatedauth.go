// Package delegatedauth guards a component's own HTTP endpoints (/metrics,
// /debug/pprof/) the way kube-controller-manager and kube-scheduler guard
// theirs (their --authentication-kubeconfig and --authorization-kubeconfig),
// by asking the API server:
//
//   - authentication: a bearer token the API server accepts (a TokenReview),
//     or a client certificate signed by the cluster's client CA (client-ca-file
//     of the ConfigMap kube-system/extension-apiserver-authentication, re-read
//     every minute); anyone else gets 401;
//   - authorization: a SubjectAccessReview of the user, the request's verb
//     (its method in lower case: get for GET) and its path as a non-resource
//     URL; a denied user gets 403.
//
// Answers are cached for 10 seconds, as kube-controller-manager caches them.
// The component's account needs the ClusterRole system:auth-delegator
// (tokenreviews and subjectaccessreviews create) and, for client
// certificates, the Role extension-apiserver-authentication-reader in
// kube-system; whoever scrapes needs get on the path (the strategy's
// kubevirt.io:metrics-reader ClusterRole grants get on /metrics).
//
// It is what k8s.io/apiserver's DelegatingAuthenticatorConfig and
// DelegatingAuthorizerConfig build, without client-go's clientset: that links
// client-go/kubernetes/scheme and with it every k8s.io/api group, which
// virt-controller must not (deps_test.go, docs/performance.md). It reuses
// k8s.io/apiserver's request authenticators (bearer token, union) and its
// user and authorizer types, and reaches the API
// server through REST clients whose scheme holds only TokenReview,
// SubjectAccessReview and ConfigMap. virt-controller, virt-operator and
// virt-handler use it; virt-api, an aggregated API server, uses
// k8s.io/apiserver's options directly (virtapi.ServeOptions).
package delegatedauth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// The ConfigMap kube-apiserver publishes its client CA in.
const (
	AuthenticationConfigMapNamespace = "kube-system"
	AuthenticationConfigMapName      = "extension-apiserver-authentication"
	ClientCAKey                      = "client-ca-file"
)

// Config configures New.
type Config struct {
	// Client reaches the API server as the component (its service account
	// in a cluster). New makes its own clients from it: with its QPS and
	// Burst, but their own rate limiter.
	Client *rest.Config
	// CacheTTL is how long a TokenReview's or a SubjectAccessReview's answer
	// is reused (default 10s, as kube-controller-manager).
	CacheTTL time.Duration
	// ClientCARefresh is how often the client CA is read again (default
	// 1m). Negative: read once, in New.
	ClientCARefresh time.Duration
}

// Guard authenticates and authorizes requests; see the package doc.
type Guard struct {
	authn    authenticator.Request
	authz    authorizer.Authorizer
	clientCA atomic.Pointer[x509.CertPool]
	core     rest.Interface
}

// New returns a Guard. It reads the client CA once now (a failure is
// logged: tokens still work, and the next read may succeed) and again every
// ClientCARefresh until ctx ends.
func New(ctx context.Context, cfg Config) (*Guard, error) {
	if cfg.Client == nil {
		return nil, errors.New("delegatedauth: Config.Client is required")
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = 10 * time.Second
	}
	if cfg.ClientCARefresh == 0 {
		cfg.ClientCARefresh = time.Minute
	}
	scheme := newScheme()
	authn, err := restClient(cfg.Client, scheme, authenticationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	authz, err := restClient(cfg.Client, scheme, authorizationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	core, err := restClient(cfg.Client, scheme, corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	g := &Guard{core: core}
	tokens := &tokenReviewer{client: authn, ttl: cfg.CacheTTL, cache: cache.NewLRUExpireCache(1024)}
	g.authn = union.New(
		authenticator.RequestFunc(g.authenticateCertificate),
		bearertoken.New(tokens),
	)
	g.authz = &accessReviewer{client: authz, ttl: cfg.CacheTTL, cache: cache.NewLRUExpireCache(1024)}
	if err := g.readClientCA(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "client certificates are not accepted until the client CA can be read; bearer tokens are")
	}
	if cfg.ClientCARefresh > 0 {
		go g.refreshClientCA(ctx, cfg.ClientCARefresh)
	}
	return g, nil
}

// Handler serves h to the requests the API server authenticates and
// authorizes: 401 to a request without credentials it accepts, 403 to a
// user it does not allow the request's verb on its path, 500 when it
// cannot be asked.
func (g *Guard) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log := klog.FromContext(r.Context())
		resp, ok, err := g.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				log.V(2).Info("request not authenticated", "path", r.URL.Path, "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{User: resp.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
		decision, reason, err := g.authz.Authorize(r.Context(), attrs)
		if decision == authorizer.DecisionAllow {
			h.ServeHTTP(w, r)
			return
		}
		if err != nil {
			log.Error(err, "authorizing request", "user", resp.User.GetName(), "path", r.URL.Path)
			http.Error(w, "Internal Server Error: authorization failed", http.StatusInternalServerError)
			return
		}
		msg := fmt.Sprintf("forbidden: User %q cannot %s path %q", resp.User.GetName(), attrs.Verb, attrs.Path)
		if reason != "" {
			msg += ": " + reason
		}
		http.Error(w, msg, http.StatusForbidden)
	})
}

// authenticateCertificate authenticates a client certificate of the client
// CA as kube-apiserver does (k8s.io/apiserver's x509 authenticator with
// CommonNameUserConversion): the user is its subject's common name, the
// groups its organizations. That authenticator is not used: it would add
// 0.9 MB of component-base's metrics and feature gates to virt-controller.
func (g *Guard) authenticateCertificate(r *http.Request) (*authenticator.Response, bool, error) {
	pool := g.clientCA.Load()
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || pool == nil {
		return nil, false, nil
	}
	certs := r.TLS.PeerCertificates
	opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return nil, false, fmt.Errorf("delegatedauth: verifying the client certificate of %q: %w", certs[0].Subject.CommonName, err)
	}
	if certs[0].Subject.CommonName == "" {
		return nil, false, errors.New("delegatedauth: the client certificate has no common name")
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: certs[0].Subject.CommonName, Groups: certs[0].Subject.Organization}}, true, nil
}

func (g *Guard) readClientCA(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	err := g.core.Get().Namespace(AuthenticationConfigMapNamespace).Resource("configmaps").Name(AuthenticationConfigMapName).
		Timeout(10 * time.Second).Do(ctx).Into(cm)
	if apierrors.IsNotFound(err) {
		g.clientCA.Store(nil)
		return nil // the API server authenticates no client certificates
	}
	if err != nil {
		return fmt.Errorf("delegatedauth: reading ConfigMap %s/%s: %w", AuthenticationConfigMapNamespace, AuthenticationConfigMapName, err)
	}
	bundle := cm.Data[ClientCAKey]
	if bundle == "" {
		g.clientCA.Store(nil)
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(bundle)) {
		return fmt.Errorf("delegatedauth: %s of ConfigMap %s/%s holds no certificate", ClientCAKey, AuthenticationConfigMapNamespace, AuthenticationConfigMapName)
	}
	g.clientCA.Store(pool)
	return nil
}

func (g *Guard) refreshClientCA(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := g.readClientCA(ctx); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "re-reading the client CA; keeping the last one")
			}
		}
	}
}

// tokenReviewer authenticates bearer tokens with TokenReviews.
type tokenReviewer struct {
	client rest.Interface
	ttl    time.Duration
	cache  *cache.LRUExpireCache // sha256 of the token -> *authenticator.Response or nil
}

func (t *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := t.cache.Get(key); ok {
		resp := v.(*authenticator.Response)
		return resp, resp != nil, nil
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	out := &authenticationv1.TokenReview{}
	if err := t.client.Post().Resource("tokenreviews").Body(review).Timeout(10 * time.Second).Do(ctx).Into(out); err != nil {
		return nil, false, fmt.Errorf("delegatedauth: TokenReview: %w", err)
	}
	var resp *authenticator.Response
	if out.Status.Authenticated {
		u := out.Status.User
		info := &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			info.Extra = make(map[string][]string, len(u.Extra))
			for k, v := range u.Extra {
				info.Extra[k] = v
			}
		}
		resp = &authenticator.Response{User: info, Audiences: out.Status.Audiences}
	}
	t.cache.Add(key, resp, t.ttl)
	return resp, resp != nil, nil
}

// accessReviewer authorizes requests with SubjectAccessReviews.
type accessReviewer struct {
	client rest.Interface
	ttl    time.Duration
	cache  *cache.LRUExpireCache // the review's spec as JSON -> decision
}

type decision struct {
	allowed bool
	reason  string
}

func (a *accessReviewer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	spec := authorizationv1.SubjectAccessReviewSpec{User: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
		for k, v := range extra {
			spec.Extra[k] = v
		}
	}
	if attrs.IsResourceRequest() {
		return authorizer.DecisionNoOpinion, "", errors.New("delegatedauth: only non-resource requests are authorized")
	}
	spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.GetPath(), Verb: attrs.GetVerb()}
	keyJSON, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	key := string(keyJSON)
	if v, ok := a.cache.Get(key); ok {
		d := v.(decision)
		return allow(d.allowed), d.reason, nil
	}
	out := &authorizationv1.SubjectAccessReview{}
	err = a.client.Post().Resource("subjectaccessreviews").Body(&authorizationv1.SubjectAccessReview{Spec: spec}).
		Timeout(10 * time.Second).Do(ctx).Into(out)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("delegatedauth: SubjectAccessReview: %w", err)
	}
	d := decision{allowed: out.Status.Allowed && !out.Status.Denied, reason: out.Status.Reason}
	a.cache.Add(key, d, a.ttl)
	return allow(d.allowed), d.reason, nil
}

func allow(ok bool) authorizer.Decision {
	if ok {
		return authorizer.DecisionAllow
	}
	return authorizer.DecisionDeny
}

// newScheme holds only the kinds the Guard sends and reads.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(authenticationv1.SchemeGroupVersion, &authenticationv1.TokenReview{})
	s.AddKnownTypes(authorizationv1.SchemeGroupVersion, &authorizationv1.SubjectAccessReview{})
	s.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.ConfigMap{})
	for _, gv := range []schema.GroupVersion{authenticationv1.SchemeGroupVersion, authorizationv1.SchemeGroupVersion, corev1.SchemeGroupVersion} {
		metav1.AddToGroupVersion(s, gv)
	}
	return s
}

func restClient(base *rest.Config, scheme *runtime.Scheme, gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("delegatedauth: %s client: %w", gv, err)
	}
	return c, nil
}
