package virtapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	genericfilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	serverfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vmkit/vmkit/virtapi/webconsole"
	"github.com/vmkit/vmkit/vmapi/generated/clientset/versioned"
	v1 "github.com/vmkit/vmkit/vmapi/v1"
)

// Group and version virt-api serves.
const (
	Group   = "subresources.kubevirt.io"
	Version = "v1"
	// Prefix is the path every subresource lives under.
	Prefix = "/apis/" + Group + "/" + Version
)

// Config is what a Server needs.
type Config struct {
	// Kube and Kubevirt are virt-api's own clients (its service account):
	// it reads VMs and VMIs, patches VMs, creates migrations and finds the
	// node agents' pods with them.
	Kube     kubernetes.Interface
	Kubevirt versioned.Interface
	// Handlers reaches the node agent of a node. Required for the
	// subresources of running VMIs.
	Handlers HandlerDialer
	// WebhookKube and WebhookKubevirt, when set, are what the admission
	// webhooks read and write with (the eviction webhook's pods, VMIs and
	// KubeVirt CR, the VM validator's instance types and revisions); Kube
	// and Kubevirt otherwise. Anyone who reaches virt-api's Service can
	// call the webhooks (#35 N5): clients with a rate limiter of their own
	// keep a flood of such calls from starving the subresources.
	WebhookKube     kubernetes.Interface
	WebhookKubevirt versioned.Interface
}

// Server serves the subresource API.
type Server struct {
	cfg Config
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Kube == nil || cfg.Kubevirt == nil {
		return nil, errors.New("virtapi: Config.Kube and Config.Kubevirt are required")
	}
	if cfg.Handlers == nil {
		return nil, errors.New("virtapi: Config.Handlers is required")
	}
	return &Server{cfg: cfg}, nil
}

// Handler returns the subresource API without authentication or
// authorization: what ServeOptions.Serve wraps in the cluster's. Use it
// alone only behind something that authorizes each request.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	vm := Prefix + "/namespaces/{namespace}/virtualmachines/{name}/"
	vmi := Prefix + "/namespaces/{namespace}/virtualmachineinstances/{name}/"
	mux.HandleFunc("PUT "+vm+"start", vmRequest(s.start))
	mux.HandleFunc("PUT "+vm+"stop", vmRequest(s.stop))
	mux.HandleFunc("PUT "+vm+"restart", vmRequest(s.restart))
	mux.HandleFunc("PUT "+vm+"migrate", s.migrateVM)
	mux.HandleFunc("GET "+vm+"expand-spec", s.expandSpec)
	mux.HandleFunc("PUT "+vm+"memorydump", s.memoryDump)
	mux.HandleFunc("PUT "+vm+"removememorydump", s.removeMemoryDump)
	mux.HandleFunc("PUT "+vm+"addvolume", s.addVolume(false))
	mux.HandleFunc("PUT "+vm+"removevolume", s.removeVolume(false))
	mux.HandleFunc("PUT "+vmi+"addvolume", s.addVolume(true))
	mux.HandleFunc("PUT "+vmi+"removevolume", s.removeVolume(true))
	mux.HandleFunc("PUT "+vmi+"pause", s.vmiPut("pause", checkPause))
	mux.HandleFunc("PUT "+vmi+"unpause", s.vmiPut("unpause", checkUnpause))
	mux.HandleFunc("PUT "+vmi+"softreboot", s.vmiPut("softreboot", checkSoftReboot))
	mux.HandleFunc("PUT "+vmi+"reset", s.vmiPut("reset", checkReset))
	mux.HandleFunc("PUT "+vmi+"freeze", s.freezeVMI("freeze"))
	mux.HandleFunc("PUT "+vmi+"unfreeze", s.freezeVMI("unfreeze"))
	for _, q := range []string{"guestosinfo", "userlist", "filesystemlist"} {
		mux.HandleFunc("GET "+vmi+q, s.guestInfo(q))
	}
	mux.HandleFunc("GET "+vmi+"console", s.stream("console"))
	mux.HandleFunc("GET "+vmi+"vnc", s.stream("vnc"))
	// The web console's page: authorized as the serial console is (get on
	// virtualmachineinstances/console), by kube-apiserver and here.
	mux.Handle("GET "+vmi+"console/web/{file...}", webconsole.Handler(webconsole.Libraries()))
	// KubeVirt's virtctl port-forward, ssh and scp to vm/NAME use the VM's
	// path: the VM's instance (of the same name) is the one reached.
	for _, p := range []string{vmi, vm} {
		mux.HandleFunc("GET "+p+"portforward/{port}", s.stream("portforward"))
		mux.HandleFunc("GET "+p+"portforward/{port}/{protocol}", s.stream("portforward"))
	}
	mux.HandleFunc("GET "+Prefix+"/version", serveVersion)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: Group}, r.URL.Path))
	})
	return mux
}

// ServeOptions configure ServeOptions.Serve.
type ServeOptions struct {
	// BindAddress and Port are where to listen (0.0.0.0:8443 by default).
	BindAddress string
	Port        int
	// CertFile and KeyFile are the serving certificate, reloaded when the
	// files change.
	CertFile, KeyFile string
	// Admission is what the validating webhooks check against; see
	// AdmissionHandler.
	Admission AdmissionConfig
	// Kubeconfig is used to delegate authentication (TokenReview, the
	// front-proxy CA of kube-system/extension-apiserver-authentication) and
	// authorization (SubjectAccessReview); empty means in-cluster.
	Kubeconfig string
	// AuthenticateWebhooks serves the admission webhooks (WebhookPaths)
	// only to callers the API server authenticates (a client certificate
	// of the cluster's client CA, or a token) and allows post on the
	// webhook's path as a non-resource URL: kube-apiserver then has to
	// present credentials, which it does only when its
	// --admission-control-config-file names a kubeconfig for virt-api's
	// Service (docs/reliability.md, "Authenticated admission webhooks").
	// Off, anyone who reaches the Service can call them, as in KubeVirt.
	AuthenticateWebhooks bool
}

// WebhookPaths are the admission webhooks' paths: kube-apiserver posts
// AdmissionReviews there (see ServeOptions.AuthenticateWebhooks).
func WebhookPaths() []string {
	return []string{ValidateVMIPath, ValidateVMPath, ValidateReplicaSetPath, MutateVMIPath, PodEvictionPath}
}

// unauthenticated paths: discovery (the aggregator's availability check and
// every client's discovery read them with the front-proxy certificate and
// no user) and health (the kubelet's probes).
var unauthenticated = sets.New("/apis", "/apis/"+Group, Prefix, Prefix+"/healthz", "/healthz", "/openapi/v2", "/openapi/v3",
	ValidateVMIPath, ValidateVMPath, ValidateReplicaSetPath, MutateVMIPath)

// Serve serves the API on opts' address with the cluster's authentication
// and authorization until ctx ends. It returns once the listener is open;
// the returned channel is closed when the server has stopped.
func (s *Server) Serve(ctx context.Context, opts ServeOptions) (<-chan struct{}, error) {
	secure := options.NewSecureServingOptions()
	if opts.BindAddress != "" {
		ip := net.ParseIP(opts.BindAddress)
		if ip == nil {
			return nil, fmt.Errorf("virtapi: bind address %q is not an IP address", opts.BindAddress)
		}
		secure.BindAddress = ip
	}
	secure.BindPort = 8443
	if opts.Port != 0 {
		secure.BindPort = opts.Port
	}
	secure.ServerCert.CertKey = options.CertKey{CertFile: opts.CertFile, KeyFile: opts.KeyFile}
	var serving *server.SecureServingInfo
	if err := secure.ApplyTo(&serving); err != nil {
		return nil, fmt.Errorf("virtapi: serving on %s:%d: %w", secure.BindAddress, secure.BindPort, err)
	}

	authn := options.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = opts.Kubeconfig
	var authnInfo server.AuthenticationInfo
	if err := authn.ApplyTo(&authnInfo, serving, nil); err != nil {
		return nil, fmt.Errorf("virtapi: delegated authentication: %w", err)
	}
	// ApplyTo always adds the anonymous authenticator; virt-api answers
	// only users the cluster knows.
	known := authnInfo.Authenticator
	authnInfo.Authenticator = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := known.AuthenticateRequest(r)
		if ok && resp.User.GetName() == user.Anonymous {
			return nil, false, nil
		}
		return resp, ok, err
	})
	authz := options.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = opts.Kubeconfig
	var authzInfo server.AuthorizationInfo
	if err := authz.ApplyTo(&authzInfo); err != nil {
		return nil, fmt.Errorf("virtapi: delegated authorization: %w", err)
	}

	codecs := serializer.NewCodecFactory(statusScheme())
	api := s.Handler()
	protected := genericfilters.WithAuthorization(api, authzInfo.Authorizer, codecs)
	protected = genericfilters.WithAuthentication(protected, authnInfo.Authenticator, genericfilters.Unauthorized(codecs), nil, nil)
	protected = genericfilters.WithRequestInfo(protected, &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	})
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", serveHealthz)
	root.HandleFunc("GET "+Prefix+"/healthz", serveHealthz)
	root.HandleFunc("GET /apis", serveAPIGroupList)
	root.HandleFunc("GET /apis/"+Group, serveAPIGroup)
	root.HandleFunc("GET "+Prefix, serveAPIResourceList)
	root.HandleFunc("GET /openapi/v2", serveOpenAPIV2)
	root.HandleFunc("GET /openapi/v3", serveOpenAPIV3)
	// kube-apiserver calls admission webhooks directly, over TLS verified
	// with the webhook configuration's caBundle, without a user unless
	// it is configured to present one (AuthenticateWebhooks).
	hooks := s.webhooks()
	admissionConfig := opts.Admission
	if admissionConfig.Expand == nil {
		admissionConfig.Expand = hooks.expand
	}
	admission := AdmissionHandler(admissionConfig)
	webhooks := http.NewServeMux()
	for _, p := range []string{ValidateVMIPath, ValidateVMPath, ValidateReplicaSetPath} {
		webhooks.Handle("POST "+p, admission)
	}
	webhooks.Handle("POST "+MutateVMIPath, PresetHandler(s.watchPresets(ctx)))
	webhooks.Handle("POST "+PodEvictionPath, EvictionHandler(EvictionConfig{Kube: hooks.cfg.Kube, Kubevirt: hooks.cfg.Kubevirt, ClusterStrategy: hooks.clusterEvictionStrategy}))
	var webhookHandler http.Handler = webhooks
	if opts.AuthenticateWebhooks {
		// A non-resource request: post on the path.
		webhookHandler = genericfilters.WithAuthorization(webhookHandler, authzInfo.Authorizer, codecs)
		webhookHandler = genericfilters.WithAuthentication(webhookHandler, authnInfo.Authenticator, genericfilters.Unauthorized(codecs), nil, nil)
		webhookHandler = genericfilters.WithRequestInfo(webhookHandler, &request.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		})
	}
	for _, p := range WebhookPaths() {
		root.Handle("POST "+p, webhookHandler)
	}
	root.Handle("/", protected)
	handler := serverfilters.WithPanicRecovery(withLogging(root), &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	})

	stopped, _, err := serving.Serve(handler, 10*time.Second, ctx.Done())
	if err != nil {
		return nil, fmt.Errorf("virtapi: serving: %w", err)
	}
	klog.FromContext(ctx).Info("virt-api serving", "address", net.JoinHostPort(secure.BindAddress.String(), strconv.Itoa(secure.BindPort)))
	return stopped, nil
}

// webhooks is the Server the admission webhooks use: s with
// Config.WebhookKube and WebhookKubevirt, where set, as its clients.
func (s *Server) webhooks() *Server {
	cfg := s.cfg
	if cfg.WebhookKube != nil {
		cfg.Kube = cfg.WebhookKube
	}
	if cfg.WebhookKubevirt != nil {
		cfg.Kubevirt = cfg.WebhookKubevirt
	}
	return &Server{cfg: cfg}
}

func statusScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return scheme
}

func withLogging(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if log := klog.V(4); log.Enabled() && !unauthenticated.Has(r.URL.Path) {
			log.InfoS("request", "method", r.Method, "path", r.URL.Path)
		}
		h.ServeHTTP(w, r)
	})
}

func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok"))
}

// writeStatus writes err as a metav1.Status, as Kubernetes API servers do.
func writeStatus(w http.ResponseWriter, err error) {
	var st *apierrors.StatusError
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	writeJSON(w, int(status.Code), status)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// clusterEvictionStrategy is the KubeVirt CR's evictionStrategy, nil when
// unset or when no KubeVirt CR can be read.
func (s *Server) clusterEvictionStrategy(ctx context.Context) *v1.EvictionStrategy {
	list, err := s.cfg.Kubevirt.KubevirtV1().KubeVirts("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for _, kv := range list.Items {
		if kv.DeletionTimestamp == nil {
			return kv.Spec.Configuration.EvictionStrategy
		}
	}
	return nil
}
