package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Pinning keeps the kernel side collecting while the daemon restarts: the
// links (and through them the programs) and the shared maps are pinned in
// bpffs, so the programs stay attached and keep writing into the ring buffer
// after the process exits. The next Open reopens them; the ring
// buffer's consumer position lives in the kernel, so the new reader
// continues exactly where the old one stopped.
//
// Layout under Options.PinPath (locked with flock while a Kernel uses
// it, so two daemons never read one ring buffer):
//
//	<PinPath>/<hash>/map_<name>           scopes, events, lost, conns
//	<PinPath>/<hash>/link_<probe>__<prog> one per attached probe
//
// <hash> covers the embedded BPF objects and every load-time choice
// (watch_all, the ring buffer's size, the program picked for each probe), so a build or a kernel
// with different programs never reuses incompatible maps. The link names
// record which program each probe runs: a resumed Kernel reports its probes
// (attached or fallback) from them. A set of pins is built in a staging
// directory and renamed into place, so a crash never leaves half of one.
const (
	pinMapPrefix  = "map_"
	pinLinkPrefix = "link_"
	pinStaging    = "staging_"
	pinRetired    = "retired_"
	pinHashLen    = 16
)

// pinSet is the pin directory a Kernel uses.
type pinSet struct {
	root string   // Options.PinPath
	lock *os.File // the root directory, flocked
	hash string
}

func (p *pinSet) dir() string { return filepath.Join(p.root, p.hash) }

// lockPins creates root (on bpffs) and takes its lock.
func lockPins(root string, opts Options) (*pinSet, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating the BPF pin directory %s (is bpffs mounted at /sys/fs/bpf?): %w", root, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil || st.Type != unix.BPF_FS_MAGIC {
		return nil, fmt.Errorf("BPF pin directory %s is not on bpffs: mount -t bpf bpf /sys/fs/bpf", root)
	}
	f, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("opening the BPF pin directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("BPF pin directory %s is in use by another drainwatch (flock: %w)", root, err)
	}
	hash, err := objectsHash(opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &pinSet{root: root, lock: f, hash: hash}, nil
}

func (p *pinSet) unlock() error {
	if p == nil || p.lock == nil {
		return nil
	}
	err := p.lock.Close() // releases the flock
	p.lock = nil
	return err
}

// objectsHash identifies the programs a Kernel with these options loads:
// the embedded objects' bytes, watch_all and each probe's program.
func objectsHash(opts Options) (string, error) {
	h := sha256.New()
	for _, b := range [][]byte{_SockStateBytes, _InflightBytes, _RefusedBytes, _SignalBytes, _ExitBytes} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "watch_all=%v;ring_bytes=%d;", opts.WatchAll, opts.RingBufferSize)
	for _, obj := range probeObjects(opts) {
		for _, p := range obj.progs {
			fmt.Fprintf(h, "%s=%s;", p.name, p.prog)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:pinHashLen], nil
}

// linkPinName is a link's pin: bpffs reserves dots in names.
func linkPinName(p probeProg) string { return pinLinkPrefix + p.name + "__" + p.prog }

// stagingDir is where a fresh Kernel pins before publishing.
func (p *pinSet) stagingDir() string {
	return filepath.Join(p.root, fmt.Sprintf("%s%s_%d", pinStaging, p.hash, os.Getpid()))
}

// removeLeftovers deletes staging and retired directories of a run that
// died while publishing: under the lock, nobody else is using them.
func (p *pinSet) removeLeftovers() error {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return fmt.Errorf("listing BPF pins: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), pinStaging) || strings.HasPrefix(e.Name(), pinRetired) {
			errs = append(errs, os.RemoveAll(filepath.Join(p.root, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// publish renames the staging directory into place (a previous run's set
// of the same hash is retired first).
func (p *pinSet) publish(staging string) error {
	dir := p.dir()
	retired := filepath.Join(p.root, pinRetired+p.hash)
	if err := os.Rename(dir, retired); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("retiring the previous pins: %w", err)
	}
	if err := os.Rename(staging, dir); err != nil {
		return fmt.Errorf("publishing BPF pins in %s: %w", dir, err)
	}
	return nil
}

// removeOthers removes every set of pins but the published one (a
// previous run's or another build's): their programs detach only now,
// after the new ones are attached. It returns the hashes removed.
func (p *pinSet) removeOthers() ([]string, error) {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return nil, fmt.Errorf("listing BPF pins: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if e.Name() == p.hash || !e.IsDir() {
			continue
		}
		removed = append(removed, strings.TrimPrefix(e.Name(), pinRetired))
		errs = append(errs, os.RemoveAll(filepath.Join(p.root, e.Name())))
	}
	return removed, errors.Join(errs...)
}

// RemovePins removes every set of pins under root (what `drainwatch
// cleanup` does): the programs detach and the maps are freed once no
// process holds them. It fails while a running Kernel holds the lock.
func RemovePins(root string) error {
	f, err := os.Open(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening the BPF pin directory: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("BPF pin directory %s is in use by a running drainwatch (flock: %w)", root, err)
	}
	if err := os.RemoveAll(root); err != nil {
		return fmt.Errorf("removing BPF pins under %s: %w", root, err)
	}
	return nil
}
