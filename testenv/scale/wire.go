package scale

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Resources the daemons read, in table order; "other" is anything else.
var resources = []string{"pods", "services", "endpointslices", "events", "replicasets", "other"}

// wire counts what one daemon receives from the API server: on the
// connection (TLS bytes, what the network carries) and per response body
// by resource (what the client decodes). Each daemon gets its own, so it
// also gives each daemon its own connection: client-go shares one cached
// transport between configs with the same TLS settings, and a custom dialer
// opts out of that cache, as N separate processes would.
type wire struct {
	wireBytes atomic.Uint64
	bodyBytes [6]atomic.Uint64 // by index in resources
	requests  atomic.Uint64
	watches   atomic.Int64 // open now
	watchMax  atomic.Int64
	watchesOp atomic.Uint64 // watch requests made
	gzipped   atomic.Uint64 // responses the API server compressed (watch streams too)
}

// config returns a copy of base whose requests all go through one
// transport of this wire: the typed and the metadata client of kube.New
// then share one connection, like the two clients of one daemon process.
func (w *wire) config(base *rest.Config) (*rest.Config, error) {
	dialing := rest.CopyConfig(base)
	dialing.Dial = w.dial
	rt, err := rest.TransportFor(dialing)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(base)
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Transport = &countingTransport{w: w, next: rt}
	return cfg, nil
}

func (w *wire) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &w.wireBytes}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Uint64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(uint64(n))
	return n, err
}

type countingTransport struct {
	w    *wire
	next http.RoundTripper
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.w.requests.Add(1)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.Uncompressed {
		t.w.gzipped.Add(1)
	}
	body := &countingBody{ReadCloser: resp.Body, n: &t.w.bodyBytes[resourceIndex(req.URL.Path)]}
	if req.URL.Query().Get("watch") == "true" {
		t.w.watchesOp.Add(1)
		open := t.w.watches.Add(1)
		for m := t.w.watchMax.Load(); open > m && !t.w.watchMax.CompareAndSwap(m, open); m = t.w.watchMax.Load() {
		}
		body.closed = func() { t.w.watches.Add(-1) }
	}
	resp.Body = body
	return resp, nil
}

// resourceIndex names the resource of an API path: a collection's last
// segment, or the segment before an object's name.
func resourceIndex(path string) int {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(segs) - 1; i >= 0 && i >= len(segs)-2; i-- {
		for j, r := range resources[:len(resources)-1] {
			if segs[i] == r {
				return j
			}
		}
	}
	return len(resources) - 1
}

type countingBody struct {
	io.ReadCloser
	n      *atomic.Uint64
	once   sync.Once
	closed func()
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(uint64(n))
	return n, err
}

func (b *countingBody) Close() error {
	if b.closed != nil {
		b.once.Do(b.closed)
	}
	return b.ReadCloser.Close()
}
