package collector

// SignalResult is the result argument of the kernel's signal_generate
// tracepoint (enum trace_signal_result in include/trace/events/signal.h).
type SignalResult uint8

const (
	SignalDelivered SignalResult = iota
	// SignalIgnored: discarded at generation, because the handler is
	// SIG_IGN or the target is a namespace init with no handler for it.
	SignalIgnored
	SignalAlreadyPending
	SignalOverflowFail
	SignalLoseInfo
)

var signalResultNames = [...]string{"delivered", "ignored", "already_pending", "overflow_fail", "lose_info"}

func (r SignalResult) String() string { return nameOf(signalResultNames[:], uint8(r), "result") }
