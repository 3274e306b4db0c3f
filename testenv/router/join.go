package router

import (
	"sort"

	"github.com/drainwatch/drainwatch/testenv/client"
)

// Join pairs client requests with the router's records of them: pair[j] is
// the index in conns of reqs[j]'s record, or -1 when the router has none (a
// request reset before its connect() returned has no local address).
//
// The client's address alone does not name one request: a connection the
// router resets leaves no TIME_WAIT behind, so the kernel hands the same
// source port to a later connection of the same run (10 of 250 in one
// TestRouterLagsBehindEndpointSlice). A record belongs to the request of its
// address that was under way when the router accepted it (the router and the
// client read one clock); in KeepAlive mode, where one address carries many
// requests, the same rule picks each request's record. A record outside every
// window of its address (clocks of two processes) goes to the earliest
// unpaired request of that address.
func Join(reqs []client.Request, conns []Conn) []int {
	byAddr := map[string][]int{}
	for i, c := range conns {
		byAddr[c.Client] = append(byAddr[c.Client], i)
	}
	for _, idx := range byAddr {
		sort.SliceStable(idx, func(a, b int) bool { return conns[idx[a]].Accepted.Before(conns[idx[b]].Accepted) })
	}
	order := make([]int, len(reqs))
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].Start.Before(reqs[order[b]].Start) })

	pair := make([]int, len(reqs))
	for j := range pair {
		pair[j] = -1
	}
	used := make([]bool, len(conns))
	var late []int // requests whose address has records but none in their window
	for _, j := range order {
		q := reqs[j]
		if q.Local == "" {
			continue
		}
		for _, i := range byAddr[q.Local] {
			a := conns[i].Accepted
			if !used[i] && !a.Before(q.Start) && !a.After(q.End) {
				pair[j], used[i] = i, true
				break
			}
		}
		if pair[j] < 0 {
			late = append(late, j)
		}
	}
	for _, j := range late {
		for _, i := range byAddr[reqs[j].Local] {
			if !used[i] {
				pair[j], used[i] = i, true
				break
			}
		}
	}
	return pair
}
