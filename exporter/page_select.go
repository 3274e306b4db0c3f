package exporter

import (
	"container/heap"
	"math"
	"slices"

	"github.com/drainwatch/drainwatch/correlate"
)

// FilteringSource is a TerminationSource that applies a filter itself
// (Filter.Match) while it reads, e.g. a store, one termination at a time.
type FilteringSource interface {
	TerminationSource
	EachMatching(f Filter, fn func(correlate.Termination))
}

// EachMatching calls fn with each termination of src that f selects, in
// no particular order.
func EachMatching(src TerminationSource, f Filter, fn func(correlate.Termination)) {
	if fs, ok := src.(FilteringSource); ok {
		fs.EachMatching(f, fn)
		return
	}
	for _, t := range src.Terminations() {
		if f.Match(t) {
			fn(t)
		}
	}
}

// SelectPage returns the page p asks for of the terminations f selects, in
// list order (compareOrder), and the continue token of the next page ("" on
// the last). Only the page's terminations are held while src is read.
func SelectPage(src TerminationSource, f Filter, p PageRequest) ([]correlate.Termination, string) {
	s := &selection{order: compareOrder, limit: p.Limit, maxPoints: pagePoints}
	EachMatching(src, f, func(t correlate.Termination) {
		if p.After == nil || p.After.compare(t) > 0 {
			s.offer(t)
		}
	})
	page := s.sorted()
	if s.bound == nil || len(page) == 0 {
		return page, ""
	}
	return page, continueToken(page[len(page)-1])
}

// selectLatest returns the n last terminations f selects, in list order.
func selectLatest(src TerminationSource, f Filter, n int) []correlate.Termination {
	s := &selection{order: func(a, b correlate.Termination) int { return compareOrder(b, a) }, limit: n, maxPoints: math.MaxInt}
	EachMatching(src, f, s.offer)
	latest := s.sorted()
	slices.Reverse(latest)
	return latest
}

// selection is a page being chosen: the first terminations offered, by
// order, that fit in limit and maxPoints (at least one), in a max-heap so
// that the last is dropped when one before it arrives.
type selection struct {
	items            []correlate.Termination
	order            func(a, b correlate.Termination) int
	limit, maxPoints int
	points           int
	// bound is the first termination left out: every one kept is before it,
	// and none at or after it can join the page.
	bound *correlate.Termination
}

func (s *selection) offer(t correlate.Termination) {
	if s.bound != nil && s.order(t, *s.bound) >= 0 {
		return
	}
	heap.Push(s, t)
	s.points += len(t.Connections)
	for s.Len() > s.limit || (s.points > s.maxPoints && s.Len() > 1) {
		last := heap.Pop(s).(correlate.Termination)
		s.points -= len(last.Connections)
		s.bound = &last
	}
}

func (s *selection) sorted() []correlate.Termination {
	slices.SortFunc(s.items, s.order)
	return s.items
}

// Len, Less, Swap, Push and Pop make selection a heap whose root is the
// last kept termination.
func (s *selection) Len() int           { return len(s.items) }
func (s *selection) Less(i, j int) bool { return s.order(s.items[i], s.items[j]) > 0 }
func (s *selection) Swap(i, j int)      { s.items[i], s.items[j] = s.items[j], s.items[i] }
func (s *selection) Push(x any)         { s.items = append(s.items, x.(correlate.Termination)) }

func (s *selection) Pop() any {
	last := s.items[len(s.items)-1]
	s.items[len(s.items)-1] = correlate.Termination{} // let it be collected
	s.items = s.items[:len(s.items)-1]
	return last
}
