package router

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"syscall"
	"time"
)

// BackendError is a pooled-mode outcome: the backend failed after the
// connection was made (closed or reset a kept-alive connection, bad response).
const BackendError = "backend_error"

type recordKey struct{}

// serveHTTP is keep-alive pooling mode: an HTTP/1.1 reverse proxy, as an
// ingress controller's upstream pool is. Every request (not every client
// connection) picks a backend round-robin and goes over an idle connection to
// that backend when there is one. A failure answers 502, as nginx does; the
// record says why (Refused when a new backend connection was refused).
func (r *Router) serveHTTP(ctx context.Context) {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, r.cfg.DialTimeout)
		defer cancel()
		return r.cfg.Dial(ctx, network, addr)
	}
	tr := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute,
		DisableCompression: true, ResponseHeaderTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	proxy := &httputil.ReverseProxy{Transport: tr, Rewrite: r.rewrite, ErrorHandler: r.proxyError,
		ModifyResponse: r.proxied}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(r.cfg.Listener); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		r.log.Error().Err(err).Msg("proxy stopped serving")
	}
}

// rewrite picks the backend and attaches the request's record; with no
// backend it sends the request nowhere (an invalid URL), which proxyError
// answers with 503.
func (r *Router) rewrite(pr *httputil.ProxyRequest) {
	rec := &Conn{Client: pr.In.RemoteAddr, Accepted: time.Now()}
	backend, ok := r.table.Pick()
	rec.Backend = backend
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { rec.Reused = i.Reused }}
	ctx := httptrace.WithClientTrace(context.WithValue(pr.Out.Context(), recordKey{}, rec), trace)
	pr.Out = pr.Out.WithContext(ctx)
	if !ok {
		pr.Out.URL = &url.URL{Scheme: "no-backend"}
		return
	}
	pr.SetURL(&url.URL{Scheme: "http", Host: backend})
	pr.Out.Host = pr.In.Host
}

func (r *Router) proxied(resp *http.Response) error {
	if rec, ok := resp.Request.Context().Value(recordKey{}).(*Conn); ok {
		rec.Outcome, rec.Status = Proxied, resp.StatusCode
		r.record(*rec)
	}
	return nil
}

func (r *Router) proxyError(w http.ResponseWriter, req *http.Request, err error) {
	rec, _ := req.Context().Value(recordKey{}).(*Conn)
	if rec == nil {
		rec = &Conn{Client: req.RemoteAddr, Accepted: time.Now()}
	}
	status := http.StatusBadGateway
	switch {
	case rec.Backend == "":
		rec.Outcome, status = NoBackend, http.StatusServiceUnavailable
	case errors.Is(err, syscall.ECONNREFUSED):
		rec.Outcome = Refused
	case rec.Reused:
		rec.Outcome = BackendError
	default:
		rec.Outcome = DialError
	}
	rec.Err, rec.Status = err.Error(), status
	r.record(*rec)
	w.WriteHeader(status)
}
