package exporter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// headersByteByByte sends its headers a byte every 25 ms (11 s for all of
// them) and never finishes: the server closes the connection after its
// header timeout without a byte of answer.
func headersByteByByte(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(floodLimits.ReadHeader + closeMargin)); err != nil {
		return err
	}
	closed := make(chan error, 1)
	go func() { closed <- expectClosed(bufio.NewReader(c), "sending headers slowly") }()
	req := "GET /api/v1/terminations HTTP/1.1\r\nHost: dw\r\nX-Slow: " + strings.Repeat("s", 400)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for i := range len(req) {
		select {
		case err := <-closed:
			return err
		case <-tick.C:
		}
		if _, err := c.Write([]byte{req[i]}); err != nil {
			return <-closed
		}
	}
	return fmt.Errorf("the server read %d bytes of headers, one every 25 ms, past its header timeout", len(req))
}

// holdListSlots takes every list slot with a list the source holds until
// its gate is closed; the group is done when they have all answered.
func holdListSlots(t *testing.T, addr string, src *gatedSource) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for range floodLimits.Lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list, status, err := readList(http.DefaultClient, "http://"+addr+"/api/v1/terminations?namespace=held")
			if err != nil || status != http.StatusOK || len(list.Terminations) != 0 {
				t.Errorf("a held list: %d, %d terminations, %v; want 200 and none", status, len(list.Terminations), err)
			}
		}()
	}
	for range floodLimits.Lists {
		select {
		case <-src.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("the %d list slots were not all taken within 10 s", floodLimits.Lists)
		}
	}
	return &wg
}

// askExcessLists asks for n lists and the /ui page while every slot is
// taken, and returns how many were answered 429 with Retry-After: 1.
func askExcessLists(t *testing.T, addr string, n int) int {
	t.Helper()
	throttled := 0
	for i := range n + 1 {
		u := "http://" + addr + "/api/v1/terminations"
		if i == n {
			u = "http://" + addr + "/ui"
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "1" {
			throttled++
		} else {
			t.Errorf("GET %s with every list slot taken: %s, Retry-After %q; want 429, 1", u, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	return throttled
}

func readList(client *http.Client, u string) (TerminationList, int, error) {
	var list TerminationList
	resp, err := client.Get(u)
	if err != nil {
		return list, 0, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&list)
	return list, resp.StatusCode, err
}

// listEachOnce reads the whole list as `drainwatch timeline` does (every
// page) and expects each termination of want exactly once.
func listEachOnce(t *testing.T, addr string, want fakeSource) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := URLDaemon("http://"+addr, http.DefaultClient).Terminations(ctx, url.Values{})
	if err != nil {
		t.Fatalf("listing during the flood: %v", err)
	}
	seen := make(map[string]int, len(want))
	for _, v := range list.Terminations {
		seen[v.Key()]++
	}
	for _, tm := range want {
		if seen[tm.Key()] != 1 {
			t.Errorf("%s listed %d times, want once", tm.Key(), seen[tm.Key()])
		}
	}
	if len(list.Terminations) != len(want) {
		t.Errorf("%d listed during the flood, want %d", len(list.Terminations), len(want))
	}
}
