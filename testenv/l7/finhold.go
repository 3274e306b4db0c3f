package l7

import (
	"fmt"
	"strings"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// finTable is the nftables table DropPodFINs adds.
const finTable = "dwl7fin"

// DropPodFINs makes ns drop the FINs pods send from port podPort (any
// 10.244.0.0/16 source): a proxy there never learns that a pod's server
// closed an idle pooled connection, and its next request on it meets the
// closed socket, which the pod's kernel answers with a RST.
//
// It stands in for the network delay that opens the keep-alive race in
// production (the FIN still in flight when the proxy reuses the
// connection): this lab's kernel has no netem qdisc to delay it. The window
// becomes every reuse after the server's idle timeout instead of one RTT
// around it, which makes the race's count exact. Only idle closes may
// happen while it holds: a FIN carried by a response would drop the data
// with it. The returned func removes the rule.
func DropPodFINs(ns *netlab.NS, podPort int) (undo func() error, err error) {
	rules := fmt.Sprintf(`table inet %s {
  chain input {
    type filter hook input priority 0; policy accept;
    ip saddr %s tcp sport %d tcp flags & fin == fin drop
  }
}
`, finTable, netlab.PodNetwork, podPort)
	if err := nft(ns, rules); err != nil {
		return nil, err
	}
	return func() error { return nft(ns, "delete table inet "+finTable+"\n") }, nil
}

func nft(ns *netlab.NS, rules string) error {
	cmd := ns.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}
