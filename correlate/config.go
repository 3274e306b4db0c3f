package correlate

import (
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Config tunes the correlator. Zero fields take the defaults below, which
// follow the kubelet's termination semantics (docs/design.md, "Kernel and kubelet facts this relies on").
type Config struct {
	// KernelTail is how long a termination stays open after the pod is gone
	// from the API, for late kernel events: the last RSTs before the network
	// namespace is destroyed. While a container's exit has not been seen,
	// the termination also stays open until deletion + grace period +
	// KernelTail, so a SIGKILL tail after a force delete is still counted.
	// Default collector.PodTail, the one decision of a deleted pod's end of
	// life that the API watches and the kernel scopes derive from too.
	KernelTail time.Duration
	// Retention is how long a completed pod is remembered (its uid and
	// completion time only) so that replayed events start no second
	// termination; the records are Tick's caller's (the daemon persists
	// them).
	Retention time.Duration
	// MaxConnPoints bounds Termination.Connections (the oldest are kept).
	MaxConnPoints int
	// SignalLead is how far a stop signal may precede the daemon's sight of
	// the deletion (the kernel and API streams race) and still belong to
	// it. A stop signal with no deletion within SignalLead is a container
	// restart, not a pod termination.
	SignalLead time.Duration
	// MinDrainDelay is the shortest time between the deletion and the
	// listener closing that does not earn the no_drain_delay diagnosis.
	MinDrainDelay time.Duration
	// BudgetMargin is the margin of the budget_too_small check:
	// preStop + drain + BudgetMargin must fit in the grace period.
	BudgetMargin time.Duration
	// PreStopMargin is added to the observed routing convergence when
	// suggesting a preStop sleep (rounded up to whole seconds).
	PreStopMargin time.Duration
	// PromptExit is how soon after the stop signal an exit with a
	// non-zero status, its listener open until then, counts as the
	// process stopping at the signal without draining (a runtime's
	// default exit: Go without signal.Notify as PID 1 exits 2 within
	// milliseconds) rather than a crash during the drain (death.go).
	PromptExit time.Duration
	// ProbeComms are the command names of this node's kubelet: connections
	// a node-local task of one of these names opens to a pod are probes,
	// kept out of the client counts. Default: "kubelet".
	ProbeComms []string
	// StartupWindow is how long after Ready a new pod's refusals and
	// resets are its startup's (refused_after_ready, reset_after_ready).
	StartupWindow time.Duration
	// BlackholeWindow is how long after pod_gone SYNs to the pod's former
	// address that the node drops still count as its blackholed
	// connections (blackhole.go); the termination completes no earlier.
	BlackholeWindow time.Duration
	// Blackholes: the kernel reports blackholed SYNs (the probe
	// "blackhole" is attached), so terminations wait BlackholeWindow for
	// them; without it they are not counted and nothing waits.
	Blackholes bool
}

// DefaultConfig returns the defaults every zero field of a Config takes.
func DefaultConfig() Config {
	return Config{
		KernelTail:    collector.PodTail,
		Retention:     time.Hour,
		MaxConnPoints: 2048,
		SignalLead:    5 * time.Second,
		MinDrainDelay: time.Second,
		BudgetMargin:  time.Second,
		PreStopMargin: 500 * time.Millisecond,
		PromptExit:    time.Second,
		ProbeComms:    []string{"kubelet"},
		StartupWindow: time.Minute,
		// The last SYNs a lagging router sends are dropped when the
		// neighbour's resolution fails, ~3 s after they were queued.
		BlackholeWindow: 10 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDuration(&c.KernelTail, d.KernelTail)
	setDuration(&c.Retention, d.Retention)
	setDuration(&c.SignalLead, d.SignalLead)
	setDuration(&c.MinDrainDelay, d.MinDrainDelay)
	setDuration(&c.BudgetMargin, d.BudgetMargin)
	setDuration(&c.PreStopMargin, d.PreStopMargin)
	setDuration(&c.PromptExit, d.PromptExit)
	setDuration(&c.StartupWindow, d.StartupWindow)
	setDuration(&c.BlackholeWindow, d.BlackholeWindow)
	if len(c.ProbeComms) == 0 {
		c.ProbeComms = d.ProbeComms
	}
	if c.MaxConnPoints <= 0 {
		c.MaxConnPoints = d.MaxConnPoints
	}
	return c
}

func setDuration(v *time.Duration, def time.Duration) {
	if *v <= 0 {
		*v = def
	}
}
