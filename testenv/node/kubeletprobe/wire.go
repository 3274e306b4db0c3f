// Package kubeletprobe is testenv's kubelet prober: the process the node
// agent runs (testenv/cmd/kubeletprober, installed as a binary named
// "kubelet") so that probe connections come from a task whose kernel comm
// is "kubelet", in the node's network namespace, as on a real node.
//
// The agent talks to it over stdin/stdout, one JSON object per line: a
// Request with an ID, answered by a Response with the same ID, in any
// order (probes run concurrently). The prober keeps the ground truth of
// every connection attempt it made: per-target counts and a per-attempt
// log, returned by the "counts" operation.
package kubeletprobe

import "time"

// Operations of a Request.
const (
	OpTCPSocket = "tcpSocket" // connect, then close
	OpHTTPGet   = "httpGet"   // GET over a new connection
	OpCounts    = "counts"    // the counts and the attempt log so far
)

// Outcomes of one connection attempt.
const (
	Accepted = "accepted" // the connection was established
	Refused  = "refused"  // ECONNREFUSED: nothing listened (a RST to the SYN)
	Failed   = "error"    // anything else: timeout, unreachable, reset
)

// UserAgent is the kubelet's probe User-Agent (kube-probe/<major>.<minor>).
const UserAgent = "kube-probe/1.37"

// Request asks for one probe, or for the counts.
type Request struct {
	ID        uint64   `json:"id"`
	Op        string   `json:"op"`
	Target    string   `json:"target,omitempty"` // literal "ip:port"
	Scheme    string   `json:"scheme,omitempty"` // httpGet: "http" (default) or "https"
	Path      string   `json:"path,omitempty"`
	Headers   []Header `json:"headers,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	// Who is probed, for the attempt log: "Readiness", "Liveness" or
	// "Startup", the pod ("namespace/name") and the container.
	Probe     string `json:"probe,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
}

// Header is one httpGet header.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Response answers the Request with the same ID. Err is empty when the
// probe passed.
type Response struct {
	ID     uint64           `json:"id"`
	Err    string           `json:"err,omitempty"`
	Status int              `json:"status,omitempty"` // httpGet: the HTTP status
	Counts map[string]Count `json:"counts,omitempty"`
	Log    []Attempt        `json:"log,omitempty"`
	// LogDropped counts the oldest attempts dropped from Log (it keeps the
	// newest MaxLog); Counts always hold every attempt.
	LogDropped int `json:"log_dropped,omitempty"`
}

// Count is what the prober saw of one target ("ip:port"). Attempts is
// Accepted + Refused + Errors: an attempt is counted when its connect
// finished.
type Count struct {
	Attempts int `json:"attempts"`
	Accepted int `json:"accepted"`
	Refused  int `json:"refused"`
	Errors   int `json:"errors"`
}

// Attempt is one connection attempt: Start is taken just before connect.
type Attempt struct {
	Target    string    `json:"target"`
	Op        string    `json:"op"`
	Probe     string    `json:"probe,omitempty"`
	Pod       string    `json:"pod,omitempty"`
	Container string    `json:"container,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Outcome   string    `json:"outcome"`
	Err       string    `json:"err,omitempty"`
}

// MaxLog bounds the attempt log: the newest 100 000 attempts (50 pods
// probed once a second fill it in ~35 minutes, as the soak found when the
// log still kept the oldest ones).
const MaxLog = 100000
