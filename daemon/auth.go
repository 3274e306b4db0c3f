package daemon

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector/kube"
)

// The HTTP authentication modes of Config.Auth.
const (
	// AuthNone serves every path to anyone who reaches the port (the lab).
	AuthNone = "none"
	// AuthKubernetes asks the API server who a bearer token belongs to
	// (TokenReview) and whether that user may GET the path
	// (SubjectAccessReview on a non-resource URL), like kube-rbac-proxy
	// and controller-runtime's metrics filters.
	AuthKubernetes = "kubernetes"
)

// Cache lifetimes of the API server's answers (kube-rbac-proxy's): a
// Prometheus scrape every 15 s costs one TokenReview and one
// SubjectAccessReview every few minutes, and a revoked binding takes
// effect within authzAllowTTL.
const (
	authnCacheTTL = 2 * time.Minute
	authzAllowTTL = 5 * time.Minute
	authzDenyTTL  = 30 * time.Second
	reviewTimeout = 10 * time.Second
)

// reviewBackoff bounds the retries of a review the API server failed to
// answer, so that an API server outage fails requests instead of piling
// them up.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// kubeAuth authenticates and authorizes requests through the API server,
// with k8s.io/apiserver's delegating authenticator and authorizer (the
// ones aggregated API servers use): cached TokenReviews and
// SubjectAccessReviews.
type kubeAuth struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	log   zerolog.Logger
}

func newKubeAuth(rc *rest.Config, log zerolog.Logger) (*kubeAuth, error) {
	client, err := kube.NewClients(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the client for token and access reviews: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient: client.AuthenticationV1(), TokenAccessReviewTimeout: reviewTimeout,
		WebhookRetryBackoff: &reviewBackoff, CacheTTL: authnCacheTTL,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("building the token authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(), AllowCacheTTL: authzAllowTTL,
		DenyCacheTTL: authzDenyTTL, WebhookRetryBackoff: &reviewBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("building the access-review authorizer: %w", err)
	}
	return &kubeAuth{authn: authn, authz: authz, log: log}, nil
}

// TokenAudience is the audience a token must be bound to for the daemon's
// API and /ui (`kubectl create token NAME --audience drainwatch`, or
// TokenRequest's spec.audiences). A token the API server accepts for itself
// is refused there: a daemon that receives such a token could replay it
// against the API server, and one bound to this audience works nowhere
// else. /metrics also accepts the API server's own audience: Prometheus
// scrapes with its ServiceAccount's token.
const TokenAudience = "drainwatch"

// readAudiences are TokenAudience as the token authenticator takes it.
var readAudiences = authenticator.Audiences{TokenAudience}

// protect serves next only to a request whose bearer token the API server
// accepts for the path's audience (else 401, see authenticate) and whose
// user RBAC allows it (else 403, see attributesFor).
func (a *kubeAuth) protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := a.authenticate(r)
		if err != nil || !ok {
			a.log.Debug().Err(err).Str("path", r.URL.Path).Msg("unauthenticated request refused")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := attributesFor(res.User, r)
		decision, reason, err := a.authz.Authorize(r.Context(), attrs)
		if err != nil || decision != authorizer.DecisionAllow {
			a.log.Debug().Err(err).Str("user", res.User.GetName()).Str("path", r.URL.Path).Str("reason", reason).
				Msg("request forbidden")
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", res.User.GetName(), attrs.Verb, r.URL.Path),
				http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate asks the API server about the request's token: bound to
// TokenAudience for every path, or, for /metrics only, to the API server's
// own audiences (a TokenReview naming none: its --api-audiences). The
// authenticator's cache keys include the audiences, so each answer is
// cached on its own.
func (a *kubeAuth) authenticate(r *http.Request) (*authenticator.Response, bool, error) {
	if r.URL.Path == "/metrics" {
		if res, ok, err := a.authn.AuthenticateRequest(r); ok && err == nil {
			return res, true, nil
		}
	}
	return a.authn.AuthenticateRequest(r.WithContext(authenticator.WithAudiences(r.Context(), readAudiences)))
}

// APIGroup is the API group of the virtual resource "terminations" that
// RBAC rules name to read the daemons' terminations:
// `apiGroups: ["drainwatch.io"], resources: ["terminations"], verbs: ["get", "list"]`.
// No API server serves it: the daemon asks for it in its
// SubjectAccessReviews.
const APIGroup = "drainwatch.io"

// attributesFor is what a request asks RBAC for. /metrics is a non-resource
// URL, like every Prometheus target protected the Kubernetes way
// (`nonResourceURLs: ["/metrics"], verbs: ["get"]`). The API and the UI
// are not: the default ClusterRole system:discovery lets every
// authenticated user GET the non-resource URLs /api/*, so they would be
// open to any ServiceAccount of the cluster. They read terminations
// instead: list for /api/v1/terminations, /api/v1/startups and /ui, get
// for one by UID.
func attributesFor(u user.Info, r *http.Request) authorizer.AttributesRecord {
	a := authorizer.AttributesRecord{User: u, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch p := r.URL.Path; {
	case p == "/ui" || p == "/api/v1/terminations" || p == "/api/v1/startups":
		a = terminationsAttributes(u, read, "list", "")
	case strings.HasPrefix(p, "/api/v1/terminations/"):
		a = terminationsAttributes(u, read, "get", strings.TrimPrefix(p, "/api/v1/terminations/"))
	case p == "/api" || strings.HasPrefix(p, "/api/"):
		a = terminationsAttributes(u, read, "get", "")
	}
	return a
}

// terminationsAttributes ask for verb on terminations; anything but a read
// asks for a verb no rule grants.
func terminationsAttributes(u user.Info, read bool, verb, name string) authorizer.AttributesRecord {
	if !read {
		verb = "write"
	}
	return authorizer.AttributesRecord{
		User: u, Verb: verb, APIGroup: APIGroup, APIVersion: "v1", Resource: "terminations", Name: name,
		ResourceRequest: true,
	}
}
