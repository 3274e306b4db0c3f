// Package l7 runs Debian's haproxy and nginx as reverse proxies in front of a
// Service of testenv's cluster, the way users run them: keep-alive pools to
// the pods, a backend list that follows the Service's EndpointSlices (an
// updater like an ingress controller's), and the proxies' own logs parsed as
// ground truth (502/503 per backend, upstream resets, refused connects).
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
//     close their idle upstream connections.
//
// Retries, which decide whether an upstream reset reaches the client as a
// 502, are configured explicitly (Config.Retry):
//   - nginx's default is `proxy_next_upstream error timeout`: an error on a
//     cached keep-alive connection (reset, or closed before the response
//     header) is retried on the next server for idempotent requests (GET,
//     HEAD, ...; not POST since 1.9.13), without using up a try. The error
//     log has the failure and the access log's $upstream_status says "502,
//     200", but the client gets the second answer.
//   - haproxy's default is `retries 3` with `retry-on conn-failure`: only a
//     connection that could not be established is retried; a request sent
//     on a reused connection that the server closed or reset is answered
//     502 (termination state SH) unless retry-on names empty-response. No
//     `option redispatch` by default: retries stay on the same server.
//
// RetryNone turns both off (`proxy_next_upstream off`; `retries 0`,
// `retry-on none`), so every upstream failure is a client 502.
package l7
