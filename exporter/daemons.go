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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Daemon is one drainwatch daemon whose terminations can be listed: reached
// directly by URL, or through the API server's pod proxy.
type Daemon interface {
	Name() string
	Terminations(ctx context.Context, q url.Values) (TerminationList, error)
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
	return retryThrottled(ctx, func() (TerminationList, time.Duration, error) { return d.get(ctx, u) })
}

// get asks for one page; a 429's wait comes with its error.
func (d urlDaemon) get(ctx context.Context, u string) (TerminationList, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return TerminationList{}, 0, fmt.Errorf("GET %s: %w", u, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return TerminationList{}, 0, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return TerminationList{}, 0, fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return TerminationList{}, throttledWait(resp), fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	list, err := decodeList(body, u)
	return list, 0, err
}

func decodeList(body []byte, from string) (TerminationList, error) {
	var list TerminationList
	if err := json.Unmarshal(body, &list); err != nil {
		return list, fmt.Errorf("decoding the terminations of %s: %w", from, err)
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
	params := map[string]string{}
	for k := range q {
		params[k] = q.Get(k)
	}
	body, err := d.client.CoreV1().Pods(d.namespace).
		ProxyGet("http", d.pod, strconv.Itoa(d.port), "api/v1/terminations", params).DoRaw(ctx)
	if err != nil {
		return TerminationList{}, fmt.Errorf("pod proxy to %s:%d: %w", d.Name(), d.port, err)
	}
	return decodeList(body, d.Name())
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

// QueryParallelism bounds the daemons QueryDaemons asks at once: a cluster
// of hundreds of nodes answers within a few round trips, without opening
// hundreds of proxied connections through the API server at once.
const QueryParallelism = 16

// QueryDaemons asks every daemon for the terminations matching f, at most
// QueryParallelism at once, and merges the answers by start time. Daemons
// that fail are returned as errors (in the order of ds); the others'
// terminations are still returned.
func QueryDaemons(ctx context.Context, ds []Daemon, f Filter) ([]TerminationView, []error) {
	lists := make([]TerminationList, len(ds))
	errs := make([]error, len(ds))
	sem := make(chan struct{}, QueryParallelism)
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			lists[i], errs[i] = d.Terminations(ctx, f.Query())
		}()
	}
	wg.Wait()
	var all []TerminationView
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("daemon %s: %w", ds[i].Name(), err))
			continue
		}
		all = append(all, lists[i].Terminations...)
	}
	sortViews(all)
	return all, failed
}
