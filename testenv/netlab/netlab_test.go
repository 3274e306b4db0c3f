package netlab

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/privileged"
)

func newNS(t *testing.T, name string) *NS {
	t.Helper()
	ns, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	return ns
}

func TestLiteralOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"10.244.0.2:80": true, "[fd00:1::2]:80": true, ":80": true,
		"localhost:80": false, "example.com:443": false, "10.0.0.1": false,
	} {
		if err := literal(addr); (err == nil) != ok {
			t.Errorf("literal(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}

func TestNamespaceLifecycle(t *testing.T) {
	privileged.RequireRoot(t)
	ns := newNS(t, "life")
	if !strings.HasPrefix(ns.Name(), Prefix+"life-") {
		t.Fatalf("name %q lacks prefix", ns.Name())
	}
	var inside syscall.Stat_t
	if err := ns.Do(func() error { return syscall.Stat("/proc/thread-self/ns/net", &inside) }); err != nil {
		t.Fatal(err)
	}
	if uint32(inside.Ino) != ns.Inode() {
		t.Fatalf("inode inside Do = %d, Inode() = %d", inside.Ino, ns.Inode())
	}
	var self syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &self); err != nil {
		t.Fatal(err)
	}
	if uint32(self.Ino) == ns.Inode() {
		t.Fatal("namespace inode equals the root namespace's")
	}
	out, err := ns.Command("cat", "/proc/self/net/dev").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "eth0") || !strings.Contains(string(out), "lo:") {
		t.Fatalf("Command did not run inside the namespace:\n%s", out)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns.Path()); !os.IsNotExist(err) {
		t.Fatalf("%s still exists after Close: %v", ns.Path(), err)
	}
}

func TestVethBridgeRouteDialListen(t *testing.T) {
	privileged.RequireRoot(t)
	a, b, c := newNS(t, "a"), newNS(t, "b"), newNS(t, "c")
	if err := b.Bridge("br0", "10.251.1.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := Veth(End{NS: c, Name: "eth0", CIDR: "10.251.1.2/24"}, End{NS: b, Name: "vc", Master: "br0"}); err != nil {
		t.Fatal(err)
	}
	if err := Veth(End{NS: a, Name: "eth0", CIDR: "10.251.0.1/30"}, End{NS: b, Name: "up0", CIDR: "10.251.0.2/30"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Route("10.251.1.0/24", "10.251.0.2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Route("default", "10.251.1.1"); err != nil {
		t.Fatal(err)
	}
	ln, err := c.Listen("tcp", "10.251.1.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			_, _ = io.WriteString(conn, "hello "+conn.RemoteAddr().String())
			conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := a.Dial(ctx, "tcp", "10.251.1.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "hello 10.251.0.1:") {
		t.Fatalf("got %q, want a greeting to 10.251.0.1 (routed through b)", got)
	}
}

func TestRemoveAll(t *testing.T) {
	privileged.RequireRoot(t)
	ns := newNS(t, "sweepme")
	removed, err := RemoveAll("sweepme-")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != ns.Name() {
		t.Fatalf("removed %v, want [%s]", removed, ns.Name())
	}
}

// TestTopology wires a fabric, two nodes and one pod per node, then checks
// fabric→pod and pod→pod (cross-node) connectivity, over IPv4 and IPv6. The
// root namespace is only asked for its routes (no packet is sent): it must
// not know ours.
func TestTopology(t *testing.T) {
	privileged.RequireRoot(t)
	fabric, err := NewFabric("fabric")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fabric.Close() })
	var pods [2]*NS
	for i := range pods {
		node := newNS(t, "node")
		if err := ConnectNode(fabric, node, i); err != nil {
			t.Fatal(err)
		}
		pods[i] = newNS(t, "pod")
		err := Veth(End{NS: pods[i], Name: "eth0", CIDR: PodIP(i, 2) + "/24", CIDR6: PodIP6(i, 2) + "/64"},
			End{NS: node, Name: "vpod", Master: NodeBridge})
		if err != nil {
			t.Fatal(err)
		}
		for _, gw := range []string{PodGateway(i), PodGateway6(i)} {
			if err := pods[i].Route("default", gw); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ip := range []string{PodIP(1, 2), PodIP6(1, 2)} {
		addr := net.JoinHostPort(ip, "80")
		ln, err := pods[1].Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range 2 {
				if conn, err := ln.Accept(); err == nil {
					_, _ = io.WriteString(conn, conn.RemoteAddr().String())
					conn.Close()
				}
			}
		}()
		for _, from := range []*NS{fabric, pods[0]} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			conn, err := from.Dial(ctx, "tcp", addr)
			cancel()
			if err != nil {
				t.Fatalf("dial %s from %s: %v", addr, from, err)
			}
			got, _ := io.ReadAll(conn)
			conn.Close()
			t.Logf("%s from %s: the pod saw %s (%v)", addr, from, got, time.Since(start).Round(time.Millisecond))
		}
		ln.Close()
		out, err := runIP("", "route", "get", ip)
		if err != nil && !strings.Contains(err.Error(), "unreachable") {
			t.Fatal(err)
		}
		if strings.Contains(out, "fab") || strings.Contains(out, NodeBridge) || strings.Contains(out, "10.240.") || strings.Contains(out, "fd00:10:240:") {
			t.Fatalf("root namespace routes the pod network through our links: %s", out)
		}
	}
}
