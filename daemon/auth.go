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
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
	client, err := kubernetes.NewForConfig(rc)
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

// protect serves next only to a request whose bearer token the API server
// accepts (else 401) and whose user may use the verb on the path as a
// non-resource URL (else 403): GET /metrics needs
// `nonResourceURLs: ["/metrics"], verbs: ["get"]`.
func (a *kubeAuth) protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := a.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			a.log.Debug().Err(err).Str("path", r.URL.Path).Msg("unauthenticated request refused")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{
			User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path, ResourceRequest: false,
		}
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
