package exporter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

func podNames(vs []TerminationView) string {
	var names []string
	for _, v := range vs {
		names = append(names, v.Pod)
	}
	return strings.Join(names, ",")
}

func TestURLDaemons(t *testing.T) {
	a, b := testServer(t, nil), testServer(t, nil)
	ds := []Daemon{URLDaemon(a.URL, http.DefaultClient), URLDaemon(b.URL+"/", http.DefaultClient),
		URLDaemon("http://127.0.0.1:1", http.DefaultClient)}
	views, errs := QueryDaemons(context.Background(), ds, Filter{Namespace: "shop", Pod: "web-6d4f-b"})
	if got := podNames(views); got != "web-6d4f-b,web-6d4f-b" {
		t.Errorf("pods %s, want web-6d4f-b from each of the two daemons", got)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "daemon http://127.0.0.1:1") {
		t.Errorf("errors %v, want one for the unreachable daemon", errs)
	}
	if views[0].Counts.RequestsKilledBySigkill != 1 || views[0].Durations["drain_duration"] != 30 {
		t.Errorf("view %+v", views[0])
	}
}

// proxyResponse serves a pod-proxy GET from an exporter handler.
type proxyResponse struct {
	h    http.Handler
	path string
}

// DoRaw answers the handler's body, or the error client-go makes of a
// proxied answer other than 200 whose body is not an API Status.
func (p proxyResponse) DoRaw(context.Context) ([]byte, error) {
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, p.path, nil)
	p.h.ServeHTTP(rec, req)
	if rec.status != 0 && rec.status != http.StatusOK {
		return nil, apierrors.NewGenericServerResponse(rec.status, "get", schema.GroupResource{Resource: "pods"}, "", rec.body.String(), 0, true)
	}
	return []byte(rec.body.String()), nil
}

func (p proxyResponse) Stream(context.Context) (io.ReadCloser, error) {
	return nil, errors.New("not used")
}

type recorder struct {
	header http.Header
	body   strings.Builder
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

func TestProxyDaemons(t *testing.T) {
	pod := func(name, phase string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "drainwatch", Name: name, Labels: labels},
			Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
	}
	dw := map[string]string{"app.kubernetes.io/name": "drainwatch"}
	client := fake.NewClientset(pod("dw-a", "Running", dw), pod("dw-b", "Pending", dw),
		pod("other", "Running", map[string]string{"app": "other"}))
	srv := NewServer(ServerConfig{Source: fakeSource{naiveTermination(), killedTermination()}})
	var asked []string
	client.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		pa := a.(k8stesting.ProxyGetAction)
		q := url.Values{}
		for k, v := range pa.GetParams() {
			q.Set(k, v)
		}
		asked = append(asked, pa.GetNamespace()+"/"+pa.GetName()+":"+pa.GetPort()+"/"+pa.GetPath()+"?"+q.Encode())
		return true, proxyResponse{srv.Handler(), "/" + pa.GetPath() + "?" + q.Encode()}, nil
	})
	ctx := context.Background()
	ds, err := ProxyDaemons(ctx, client, "drainwatch", "app.kubernetes.io/name=drainwatch", 9090)
	if err != nil || len(ds) != 1 || ds[0].Name() != "drainwatch/dw-a" {
		t.Fatalf("daemons %v, %v; want only the running drainwatch pod dw-a", ds, err)
	}
	views, errs := QueryDaemons(ctx, ds, Filter{Workload: "web"})
	if len(errs) != 0 || podNames(views) != "web-6d4f-a,web-6d4f-b" {
		t.Fatalf("views %s, errors %v", podNames(views), errs)
	}
	if want := "drainwatch/dw-a:9090/api/v1/terminations?limit=500&workload=web"; len(asked) != 1 || asked[0] != want {
		t.Errorf("proxy requests %v, want [%s]", asked, want)
	}
	if _, err := ProxyDaemons(ctx, fake.NewClientset(), "drainwatch", "x=y", 9090); err == nil {
		t.Error("no daemon pod: want an error")
	}
}
