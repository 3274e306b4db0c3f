package netlab

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// runIP runs `ip [-n netns] args...` and returns its stdout.
func runIP(netns string, args ...string) (string, error) {
	full := args
	if netns != "" {
		full = append([]string{"-n", netns}, args...)
	}
	return runIPStdin("", full...)
}

func runIPStdin(stdin string, args ...string) (string, error) {
	cmd := exec.Command("ip", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// IP runs iproute2 commands inside the namespace, one `ip` process for all of
// them (`ip -n <ns> -batch -`). Each command is written without the leading
// "ip", e.g. "link set eth0 up".
func (ns *NS) IP(cmds ...string) error {
	if len(cmds) == 0 {
		return nil
	}
	if _, err := runIPStdin(strings.Join(cmds, "\n")+"\n", "-n", ns.name, "-batch", "-"); err != nil {
		return fmt.Errorf("in netns %s: %w", ns.name, err)
	}
	return nil
}

// IPOutput runs one iproute2 command inside the namespace and returns stdout.
func (ns *NS) IPOutput(args ...string) (string, error) {
	out, err := runIP(ns.name, args...)
	if err != nil {
		return "", fmt.Errorf("in netns %s: %w", ns.name, err)
	}
	return out, nil
}

// Sysctl sets a sysctl of the namespace, e.g. Sysctl("net/ipv4/ip_forward", "1").
// Networking sysctls under /proc/sys/net are per network namespace and
// resolved against the namespace of the thread that opens them.
func (ns *NS) Sysctl(key, value string) error {
	return ns.Do(func() error {
		return writeFile("/proc/sys/"+strings.TrimPrefix(key, "/"), value)
	})
}

// End is one end of a veth pair: the namespace it lives in, the interface
// name there, and optional addresses in CIDR form ("10.244.0.1/24",
// "fd00:10:244::1/64").
type End struct {
	NS    *NS
	Name  string
	CIDR  string
	CIDR6 string
	// Master, when set, enslaves this end to that bridge instead of giving it
	// an address.
	Master string
}

// Veth creates a veth pair between two namespaces, gives each end its
// address (or bridge), and brings both up. The pair is created directly in
// the target namespaces, so its names never touch the root namespace.
func Veth(a, b End) error {
	if err := a.NS.IP(fmt.Sprintf("link add %s type veth peer name %s netns %s", a.Name, b.Name, b.NS.name)); err != nil {
		return fmt.Errorf("creating veth %s/%s: %w", a.Name, b.Name, err)
	}
	for _, e := range []End{a, b} {
		if err := e.NS.IP(e.setupCmds()...); err != nil {
			return fmt.Errorf("configuring veth end %s: %w", e.Name, err)
		}
	}
	return nil
}

func (e End) setupCmds() []string {
	var cmds []string
	if e.Master != "" {
		cmds = append(cmds, fmt.Sprintf("link set %s master %s", e.Name, e.Master))
	}
	cmds = append(cmds, addrCmds(e.Name, e.CIDR, e.CIDR6)...)
	return append(cmds, fmt.Sprintf("link set %s up", e.Name))
}

// addrCmds adds addresses to a device, IPv6 ones without duplicate address
// detection (see topology.go).
func addrCmds(dev string, cidrs ...string) []string {
	var cmds []string
	for _, c := range cidrs {
		switch {
		case c == "":
		case strings.Contains(c, ":"):
			cmds = append(cmds, fmt.Sprintf("addr add %s dev %s nodad", c, dev))
		default:
			cmds = append(cmds, fmt.Sprintf("addr add %s dev %s", c, dev))
		}
	}
	return cmds
}

// Bridge creates a bridge in the namespace with addresses (CIDR form, none
// or empty for none) and brings it up. The kernel gives it its lowest
// port's MAC address and changes it when that port goes (a pod's veth at
// its CNI DEL); New has IPv6 announce the change as IPv4 does.
func (ns *NS) Bridge(name string, cidrs ...string) error {
	cmds := []string{fmt.Sprintf("link add %s type bridge", name)}
	cmds = append(cmds, addrCmds(name, cidrs...)...)
	cmds = append(cmds, fmt.Sprintf("link set %s up", name))
	if err := ns.IP(cmds...); err != nil {
		return fmt.Errorf("creating bridge %s: %w", name, err)
	}
	return nil
}

// Route adds a route: dst ("10.244.1.0/24" or "default") via a gateway;
// the gateway's family is the route's.
func (ns *NS) Route(dst, via string) error {
	if err := ns.IP(fmt.Sprintf("route add %s via %s", dst, via)); err != nil {
		return fmt.Errorf("adding route %s via %s: %w", dst, via, err)
	}
	return nil
}
