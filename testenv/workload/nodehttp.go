package workload

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Debian's Node.js and tini.
const (
	NodePath = "/usr/bin/node"
	TiniPath = "/usr/bin/tini"
)

// nodeServer is a Node.js http server with testenv's routes (/work,
// /slow?ms=N, /ready) and no SIGTERM handler: Node's default action for
// SIGTERM is to die of it, whatever it is serving (exit 143 under an init
// that forwards the signal, as Node.js apps run in real images).
const nodeServer = `'use strict';
const http = require('http');
const [host, port] = [process.argv[2], Number(process.argv[3])];
const send = (res, code, body) => { res.writeHead(code, {'content-type': 'text/plain'}); res.end(body); };
http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/ready' || url.pathname === '/work') return send(res, 200, 'ok ' + url.pathname + '\n');
  if (url.pathname !== '/slow') return send(res, 404, 'not found\n');
  const ms = Math.min(Number(url.searchParams.get('ms') || 2000), 300000);
  setTimeout(() => send(res, 200, 'ok /slow ' + ms + 'ms\n'), ms);
}).listen(port, host, () => console.error(JSON.stringify({event: 'listening', host, port, pid: process.pid})));
`

// NodeHTTP is nodeServer run by Debian's Node.js under Debian's tini (PID
// 1, which forwards the stop signal to node): tini -- node server.js.
type NodeHTTP struct {
	Dir  string
	Addr string // "0.0.0.0:8080"
}

// Write writes the server's script into Dir and returns tini's argv.
func (n NodeHTTP) Write() ([]string, error) {
	host, port, err := net.SplitHostPort(n.Addr)
	if err != nil {
		return nil, fmt.Errorf("node http server address %q: %w", n.Addr, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("node http server dir: %w", err)
	}
	script := filepath.Join(n.Dir, "server.js")
	if err := os.WriteFile(script, []byte(nodeServer), 0o644); err != nil {
		return nil, fmt.Errorf("node http server script: %w", err)
	}
	return []string{TiniPath, "--", NodePath, script, host, port}, nil
}
