package exporter

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// Page sizes of GET /api/v1/terminations. A page is chosen while the source
// is read, holding at most its own terminations, so they bound what one list
// request holds: MaxPageSize terminations and pagePoints connection points
// (a termination holds at most correlate's MaxConnPoints, 2,048).
const (
	DefaultPageSize = 100
	MaxPageSize     = 500
	// pagePoints ends a page early when its terminations hold that many
	// connection points (2 MiB of them in memory, ~2.5 MiB of JSON): 32
	// terminations of a connection flood fill a page, a quiet node's fill
	// it by count.
	pagePoints = 1 << 16
)

// PageRequest is where a page starts and how long it may be.
type PageRequest struct {
	Limit int
	After *cursor // nil: from the first termination
}

// cursor is the place of a termination in the list order (compareOrder):
// a page continues after it, so a termination added meanwhile is listed
// in its place and none is listed twice.
type cursor struct {
	Version int       `json:"v"`
	Start   time.Time `json:"s"`
	Pod     string    `json:"p"`
	Key     string    `json:"k"`
}

const cursorVersion = 1

// ParsePage reads limit (default DefaultPageSize, at most MaxPageSize) and
// continue (a token of an earlier page) from a query.
func ParsePage(q url.Values) (PageRequest, error) {
	p := PageRequest{Limit: DefaultPageSize}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, fmt.Errorf("limit=%q: give a number of terminations from 1 to %d", s, MaxPageSize)
		}
		p.Limit = min(n, MaxPageSize)
	}
	if s := q.Get("continue"); s != "" {
		c, err := decodeCursor(s)
		if err != nil {
			return p, fmt.Errorf("continue=%q is not a token this API returned (%v): list again without continue", s, err)
		}
		p.After = &c
	}
	return p, nil
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, errors.New("not base64url")
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, errors.New("not a cursor")
	}
	if c.Version != cursorVersion {
		return c, fmt.Errorf("version %d, this daemon reads %d", c.Version, cursorVersion)
	}
	return c, nil
}

// continueToken is the token of the page ending at t.
func continueToken(t correlate.Termination) string {
	b, _ := json.Marshal(cursor{Version: cursorVersion, Start: wallStart(t), Pod: t.Pod, Key: t.Key()})
	return base64.RawURLEncoding.EncodeToString(b)
}

// compareOrder is the list order: by start, then pod name, then key (a
// pod's container terminations differ by it), a total order, so that pages
// never overlap.
func compareOrder(a, b correlate.Termination) int {
	return cmp.Or(wallStart(a).Compare(wallStart(b)), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Key(), b.Key()))
}

// compare places a termination after (1), at (0) or before (-1) c.
func (c cursor) compare(t correlate.Termination) int {
	return cmp.Or(wallStart(t).Compare(c.Start), cmp.Compare(t.Pod, c.Pod), cmp.Compare(t.Key(), c.Key))
}

// wallStart is a termination's start without the monotonic clock reading a
// decoded cursor lacks, so that both compare by the same clock.
func wallStart(t correlate.Termination) time.Time { return t.Start().Round(0) }
