// Package l7 runs Debian's haproxy and nginx as reverse proxies in front of a
// Service of testenv's cluster, the way users run them: keep-alive pools to
// the pods, a backend list that follows the Service's EndpointSlices (an
// updater like an ingress controller's), and the proxies' own logs parsed as
// ground truth (502/503 per backend, upstream resets, refused and
// blackholed connects).
//
// The proxy runs inside a network namespace our code created (the cluster's
// fabric, where clients and routers live), listens on that namespace's
// loopback and dials the pods from there.
//
// Updates:
//   - haproxy: a backend of server-template slots, filled and emptied
//     through the runtime API (stats socket: `set server be/sN addr`, `set
//     server be/sN state ready|maint`), as haproxy-ingress and the Data Plane
//     API do. No reload: the pools of the remaining servers stay.
//   - nginx: the upstream block is rewritten and the master gets SIGHUP
//     (what `nginx -s reload` sends), as ingress-nginx does when endpoints
//     change without its Lua balancer. A reload starts new workers with new,
//     empty keep-alive pools; the old workers finish their requests and
//     close their idle upstream connections. Until an old worker exits it
//     still serves requests arriving on its client connections with the old
//     upstream list (seen here: a request sent to the removed pod after the
//     new worker had started), so an update counts as applied only once the
//     old worker has exited.
//
// What reaches the client when a pooled connection was closed by the pod
// (the keep-alive race; the tests measure each case exactly):
//   - nginx answers 502 and logs "recv() failed (104: Connection reset by
//     peer) while reading response header from upstream" (or "upstream
//     prematurely closed connection") — unless it retries: its default
//     `proxy_next_upstream error timeout` retries an idempotent request
//     (GET, HEAD, ...; not POST since 1.9.13) after an error on a cached
//     connection, without using up a try. The client then gets a 200; the
//     error log keeps the failure and $upstream_status says "502, 200".
//   - haproxy answers 502 with termination state SH when the request is the
//     first on the client's connection. On a kept-alive client connection
//     it closes that connection without an answer and logs nothing, so that
//     the client retries (browsers and Go's http.Transport do, for
//     idempotent requests): its log undercounts the race. Its default
//     `retries 3` / `retry-on conn-failure` retries failed connects only;
//     `retry-on empty-response` (RetryEmptyResponse) retries the request on
//     a new connection and logs it as a retry (%rc), without the abort.
//     No `option redispatch` by default: retries stay on the same server.
//   - haproxy's pool has no per-connection idle timeout: every
//     pool-purge-delay (5 s by default) it closes part of the idle
//     connections it has not needed lately, so making the proxy's idle time
//     shorter than the pod's is not a reliable fix there (it is for nginx's
//     upstream keepalive_timeout).
//
// RetryNone turns retries off (`proxy_next_upstream off`; `retries 0`,
// `retry-on none`), so every upstream failure answers the client.
package l7
