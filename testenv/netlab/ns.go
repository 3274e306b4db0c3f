// Package netlab creates the network namespaces, veth pairs, bridges and
// routes the test environment's pods, nodes and fabric live in.
//
// Every namespace is named Prefix+<name>-<random> and bind-mounted under
// /run/netns, so `ip netns exec` and `nsenter --net=/run/netns/...` work on
// it by hand. Close removes it; RemoveAll sweeps what a crashed run left.
//
// Links are configured with the `ip` command (iproute2), not a netlink
// library: no new module in a go.mod several engineers edit at once, and
// `ip netns add` does the /run/netns bind mount and mount propagation exactly
// the way `ip netns exec` expects. The cost is one fork/exec per batch of
// commands (about 2 ms), a handful per pod.
//
// Sockets and processes are created inside a namespace from a locked OS
// thread switched with setns (Do): a socket belongs to the namespace of the
// thread that created it, and a child process inherits the namespaces of the
// thread that forked it.
//
// Network rule: only literal IP addresses are accepted by Dial and Listen, so
// no name resolution (and no DNS packet) ever leaves from inside a namespace.
package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// Prefix starts the name of every namespace netlab creates.
const Prefix = "dwlab-"

// NetnsDir is where iproute2 bind-mounts named network namespaces.
const NetnsDir = "/run/netns"

// NS is a named network namespace created by this package.
type NS struct {
	name  string
	inode uint32
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// New creates a namespace named Prefix+name+"-"+random, with loopback up.
func New(name string) (*NS, error) {
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return nil, fmt.Errorf("random netns suffix: %w", err)
	}
	full := Prefix + unsafeChars.ReplaceAllString(name, "_") + "-" + hex.EncodeToString(suffix)
	if _, err := runIP("", "netns", "add", full); err != nil {
		return nil, fmt.Errorf("creating netns %s: %w", full, err)
	}
	ns := &NS{name: full}
	var st syscall.Stat_t
	if err := syscall.Stat(ns.Path(), &st); err != nil {
		_ = ns.Close()
		return nil, fmt.Errorf("stat netns %s: %w", full, err)
	}
	ns.inode = uint32(st.Ino)
	// No duplicate address detection on the namespace's links (their
	// link-local addresses too): nothing else is on them, and a tentative
	// address holds the first IPv6 connection for seconds. A link whose MAC
	// address changes (a node bridge whose lowest port went) announces it
	// with an unsolicited neighbour advertisement, as IPv4 sends a
	// gratuitous ARP: without it, the pods on the bridge send to their
	// gateway's old address until their neighbour entries expire.
	// (The CNI bridge plugin fixes its bridge's MAC instead; here the
	// kernel tests' blackhole counts are measured with the changing one,
	// see the docs' limits.)
	for key, v := range map[string]string{
		"net/ipv6/conf/all/accept_dad": "0", "net/ipv6/conf/default/accept_dad": "0",
		"net/ipv6/conf/all/ndisc_notify": "1", "net/ipv6/conf/default/ndisc_notify": "1",
	} {
		if err := ns.Sysctl(key, v); err != nil {
			_ = ns.Close()
			return nil, err
		}
	}
	if err := ns.IP("link set lo up"); err != nil {
		_ = ns.Close()
		return nil, err
	}
	return ns, nil
}

// Name is the namespace's name under /run/netns.
func (ns *NS) Name() string { return ns.name }

// Path is the namespace's bind mount, usable with setns(2) and nsenter.
func (ns *NS) Path() string { return filepath.Join(NetnsDir, ns.name) }

// Inode is the namespace's inode number: what the kernel reports as the
// netns inum of a socket created inside it.
func (ns *NS) Inode() uint32 { return ns.inode }

// String returns the name, for logs.
func (ns *NS) String() string { return ns.name }

// Close deletes the namespace. Its veth ends are destroyed with it (and
// their peers with them) once no process or socket holds it any more.
// Closing twice is harmless.
func (ns *NS) Close() error {
	if _, err := os.Stat(ns.Path()); os.IsNotExist(err) {
		return nil
	}
	if _, err := runIP("", "netns", "delete", ns.name); err != nil {
		return fmt.Errorf("deleting netns %s: %w", ns.name, err)
	}
	return nil
}

// RemoveAll deletes every namespace whose name starts with Prefix+match: the
// sweep after a crashed run. It returns the names it removed.
func RemoveAll(match string) ([]string, error) {
	return RemoveIf(func(name string) bool { return strings.HasPrefix(name, Prefix+match) })
}

// RemoveIf deletes every namespace under /run/netns whose full name
// (Prefix included) satisfies match, and returns the names it removed.
func RemoveIf(match func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(NetnsDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", NetnsDir, err)
	}
	var removed []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), Prefix) || !match(e.Name()) {
			continue
		}
		if err := (&NS{name: e.Name()}).Close(); err != nil {
			return removed, err
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}
