package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf/link"
)

// errNoPinnedLink: pins without any link feed nothing worth resuming.
var errNoPinnedLink = errors.New("no pinned link")

// resume reopens the pinned maps and links of the same programs, without
// attaching anything. Each probe's status follows from its link's pin: the
// hash fixes which program every probe runs, so a pinned link is attached
// (or its fallback), and a missing one was unavailable when the pins were
// made.
func (k *Kernel) resume(opts Options) error {
	dir := k.pins.dir()
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	maps, err := loadPinnedMaps(dir, uint32(opts.RingBufferSize))
	if err != nil {
		return err
	}
	var (
		links   []link.Link
		missing = map[string]error{}
		progs   []probeProg
	)
	for _, obj := range probeObjects(opts) {
		if obj.onDemand {
			// Pinned while attached, unpinned when detached.
			l, err := loadPinnedMessageLinks(dir, obj)
			if err != nil {
				closeLinks(links)
				maps.close()
				return err
			}
			k.msg = messageProbes{mode: opts.MessageProbes, obj: obj, watchAll: opts.WatchAll, links: l, pinDir: dir}
			progs = append(progs, obj.progs...)
			continue
		}
		for _, p := range obj.progs {
			progs = append(progs, p)
			l, err := link.LoadPinnedLink(filepath.Join(dir, linkPinName(p)), nil)
			switch {
			case errors.Is(err, os.ErrNotExist):
				missing[p.name] = fmt.Errorf("%s was not attached by the run that pinned the programs in %s", p.hook, dir)
			case err != nil:
				closeLinks(links)
				maps.close()
				return fmt.Errorf("loading the pinned link of %s: %w", p.hook, err)
			default:
				links = append(links, l)
			}
		}
	}
	if len(links) == 0 {
		maps.close()
		return fmt.Errorf("resuming %s: %w", dir, errNoPinnedLink)
	}
	k.maps, k.links, k.resumed = maps, links, true
	for _, p := range progs {
		if p.prog == k.msg.obj.progs[0].prog {
			k.reportMessageProbes()
		} else if !k.msg.has(p) {
			k.report(p, missing[p.name])
		}
	}
	return k.resumeMessageProbes()
}

func closeLinks(ls []link.Link) {
	for _, l := range ls {
		l.Close()
	}
}

// pinFresh pins the maps and links just created into a staging directory,
// publishes it, and removes the pins it replaces (after the new programs
// are attached, so the old ones detach last).
func (k *Kernel) pinFresh() error {
	staging := k.pins.stagingDir()
	if err := os.Mkdir(staging, 0o700); err != nil {
		return fmt.Errorf("creating BPF pin directory %s: %w", staging, err)
	}
	err := k.pinInto(staging)
	if err == nil {
		err = k.pins.publish(staging)
	}
	if err != nil {
		os.RemoveAll(staging)
		return err
	}
	k.msg.mu.Lock()
	k.msg.pinDir = k.pins.dir()
	k.msg.mu.Unlock()
	removed, err := k.pins.removeOthers()
	if err != nil {
		k.log.Warn().Err(err).Msg("removing replaced BPF pins: run drainwatch cleanup once no drainwatch runs")
	}
	for _, hash := range removed {
		ev := k.log.Info().Str("old", hash).Str("new", k.pins.hash)
		if hash == k.pins.hash {
			ev.Msg("replaced the pinned eBPF programs of a previous run: no saved state continues them, their unread events are dropped")
		} else {
			ev.Msg("new eBPF programs attached; detached and unpinned those of another build")
		}
	}
	return nil
}

func (k *Kernel) pinInto(dir string) error {
	for name, m := range k.maps.byName {
		if err := m.Pin(filepath.Join(dir, pinMapPrefix+name)); err != nil {
			return fmt.Errorf("pinning BPF map %s: %w", name, err)
		}
	}
	for i, l := range k.links {
		if err := l.Pin(filepath.Join(dir, k.linkPins[i])); err != nil {
			return fmt.Errorf("pinning BPF link %s: %w", k.linkPins[i], err)
		}
	}
	for i, l := range k.msg.links {
		name := linkPinName(k.msg.obj.progs[i])
		if err := l.Pin(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("pinning BPF link %s: %w", name, err)
		}
	}
	return nil
}
