package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Daemon is one drainwatch daemon whose terminations and startups can be
// listed: reached directly by URL, or through the API server's pod proxy.
type Daemon interface {
	Name() string
	Terminations(ctx context.Context, q url.Values) (TerminationList, error)
	// Startups lists the startups of new pods q selects (one list: the
	// API has no continue); a daemon older than /api/v1/startups answers
	// an error that is ErrStartupsNotServed.
	Startups(ctx context.Context, q url.Values) (StartupList, error)
}

// Query returns the API query string of a filter (the inverse of
// ParseFilter).
func (f Filter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"namespace": f.Namespace, "workload": f.Workload, "pod": f.Pod, "revision": f.Revision} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	return q
}

// URLDaemon is a daemon reached at base ("http://10.0.0.5:9090").
func URLDaemon(base string, client *http.Client) Daemon {
	return urlDaemon{base: strings.TrimRight(base, "/"), client: client}
}

type urlDaemon struct {
	base   string
	client *http.Client
}

func (d urlDaemon) Name() string { return d.base }

// Terminations reads every page of the daemon's list.
func (d urlDaemon) Terminations(ctx context.Context, q url.Values) (TerminationList, error) {
	return allPages(ctx, q, d.page)
}

func (d urlDaemon) page(ctx context.Context, q url.Values) (TerminationList, error) {
	u := d.base + "/api/v1/terminations?" + q.Encode()
	body, err := retryThrottled(ctx, func() ([]byte, time.Duration, error) { return d.get(ctx, u) })
	if err != nil {
		return TerminationList{}, err
	}
	return decodeList[TerminationList](body, "terminations", u)
}

// get asks for one answer; a 429's wait comes with its error.
func (d urlDaemon) get(ctx context.Context, u string) ([]byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", u, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, throttledWait(resp), &statusError{url: u, code: resp.StatusCode, status: resp.Status, body: strings.TrimSpace(string(body))}
	}
	return body, 0, nil
}

// statusError is a daemon's answer other than 200, quoted: "GET URL: 401
// Unauthorized: BODY".
type statusError struct {
	url, status, body string
	code              int
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: %s: %s", e.url, e.status, e.body) }

// decodeList decodes a list of what (terminations, startups) from a daemon.
func decodeList[L any](body []byte, what, from string) (L, error) {
	var list L
	if err := json.Unmarshal(body, &list); err != nil {
		return list, fmt.Errorf("decoding the %s of %s: %w", what, from, err)
	}
	return list, nil
}

// PodClient is what ProxyDaemons uses of the API: pods and their proxy.
// collector/kube's Clients and client-go's Clientset satisfy it.
type PodClient interface {
	CoreV1() corev1client.CoreV1Interface
}

// proxyDaemon is a daemon pod reached through the API server's pod proxy
// (GET /api/v1/namespaces/<ns>/pods/<name>:<port>/proxy/api/v1/terminations),
// with the user's credentials: nothing needs to be exposed.
type proxyDaemon struct {
	client    PodClient
	namespace string
	pod       string
	port      int
}

func (d proxyDaemon) Name() string { return d.namespace + "/" + d.pod }

// Terminations reads every page of the daemon's list (client-go retries a
// 429 after its Retry-After itself).
func (d proxyDaemon) Terminations(ctx context.Context, q url.Values) (TerminationList, error) {
	return allPages(ctx, q, d.page)
}

func (d proxyDaemon) page(ctx context.Context, q url.Values) (TerminationList, error) {
	body, err := d.get(ctx, "api/v1/terminations", q)
	if err != nil {
		return TerminationList{}, err
	}
	return decodeList[TerminationList](body, "terminations", d.Name())
}

// get asks the daemon for path through the pod proxy.
func (d proxyDaemon) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	params := map[string]string{}
	for k := range q {
		params[k] = q.Get(k)
	}
	body, err := d.client.CoreV1().Pods(d.namespace).
		ProxyGet("http", d.pod, strconv.Itoa(d.port), path, params).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("pod proxy to %s:%d: %w", d.Name(), d.port, err)
	}
	return body, nil
}

// ProxyDaemons lists the running drainwatch pods of namespace matching
// selector ("app.kubernetes.io/name=drainwatch") as daemons reached through
// the pod proxy on port.
func ProxyDaemons(ctx context.Context, client PodClient, namespace, selector string, port int) ([]Daemon, error) {
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing drainwatch pods (namespace %s, selector %s): %w", namespace, selector, err)
	}
	var ds []Daemon
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			ds = append(ds, proxyDaemon{client: client, namespace: namespace, pod: p.Name, port: port})
		}
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("no running drainwatch pod in namespace %s with labels %s (of %d listed)", namespace, selector, len(pods.Items))
	}
	return ds, nil
}
