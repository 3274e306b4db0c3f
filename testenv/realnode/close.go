package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// Close stops the kubelet (SIGTERM, as systemd would), kills every process
// in the node's cgroups (containerd, its shims, the pods' pause and
// container processes: a stopped kubelet leaves pods running, as on a real
// node), unmounts what containerd mounted under the node's directory
// (rootfs overlays, pod network namespaces), then removes the namespace,
// cgroups and directory. Calling it twice is fine.
func (n *Node) Close() error {
	var errs []error
	for i := len(n.procs) - 1; i >= 0; i-- {
		if n.procs[i].name == "kubelet" {
			n.procs[i].stop(10 * time.Second)
		}
	}
	if n.Dir != "" {
		errs = append(errs, killCgroup(n.cgroupRoot()))
	}
	for _, p := range n.procs {
		p.stop(5 * time.Second)
	}
	n.procs = nil
	for _, r := range []**netlab.Relay{&n.relay, &n.serviceRelay} {
		if *r != nil {
			errs = append(errs, (*r).Close())
			*r = nil
		}
	}
	if n.Dir != "" {
		errs = append(errs, unmountUnder(n.Dir))
	}
	if n.NS != nil {
		errs = append(errs, n.NS.Close())
		n.NS = nil
	}
	if n.Dir != "" {
		errs = append(errs, removeLogLinks(n.Dir))
		errs = append(errs, os.RemoveAll(n.Dir))
		n.Dir = ""
	}
	return errors.Join(errs...)
}

// unmountUnder lazily unmounts every mount point under dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// containerLogLinks is where every kubelet links its containers' logs
// (a constant in the kubelet, not configurable).
const containerLogLinks = "/var/log/containers"

// removeLogLinks removes the kubelet's links to logs under dir: a stopped
// kubelet leaves them, and they would dangle.
func removeLogLinks(dir string) error {
	entries, err := os.ReadDir(containerLogLinks)
	if err != nil {
		return nil // no kubelet ever made it
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}
