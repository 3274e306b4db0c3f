package l7

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeLog(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParseHAProxyLog: haproxy's own warnings are skipped; SH is an abort,
// SC a refused connect (or one an ICMP unreachable ended: the same line),
// sC a connect timeout, <NOSRV> no backend; %rc counts retries.
func TestParseHAProxyLog(t *testing.T) {
	p := writeLog(t, "haproxy.out",
		"[WARNING]  (11295) : Server be/s1 is UP/READY (leaving forced maintenance).",
		`l7req 127.0.0.1:33474 10.244.1.2:8080 200 ---- 0 "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:33498 10.244.1.2:8080 502 SH-- 0 "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:33500 10.244.1.3:8080 503 SC-- 3 "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:33502 10.244.1.3:8080 200 ---- +1 "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:33504 - 503 SC-- 0 "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:57040 10.244.1.4:8080 503 SC-- 0 "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:57054 10.244.1.4:8080 503 sC-- 0 "GET /work HTTP/1.1"`,
	)
	got, err := parseHAProxyLog(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{Requests: 7, Status: map[int]int{200: 2, 502: 1, 503: 4}, Retried: 2, Backends: map[string]Backend{
		"10.244.1.2:8080": {Attempts: 2, BadGateway: 1, Aborted: 1},
		"10.244.1.3:8080": {Attempts: 2, Unavailable: 1, Refused: 1},
		"10.244.1.4:8080": {Attempts: 2, Unavailable: 2, Refused: 1, Blackholed: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// TestParseNginxLogs: the access log's attempts per upstream (a retry lists
// two) and the error log's reasons per upstream: a connect refused (111),
// or blackholed (113, 101, 110 while connecting; a timeout reading the
// response is neither).
func TestParseNginxLogs(t *testing.T) {
	access := writeLog(t, "access.log",
		`l7req 127.0.0.1:40000 200 "10.244.1.2:8080" "200" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40002 502 "10.244.1.2:8080" "502" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40004 200 "10.244.1.2:8080, 10.244.1.3:8080" "502, 200" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40006 503 "-" "-" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40008 502 "be" "502" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40010 502 "10.244.1.4:8080" "502" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40012 502 "10.244.1.4:8080" "502" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40014 504 "10.244.1.4:8080" "504" "GET /work HTTP/1.1"`,
		`l7req 127.0.0.1:40016 504 "10.244.1.5:8080" "504" "GET /work HTTP/1.1"`,
	)
	errs := writeLog(t, "error.log",
		`2026/11/30 12:40:01 [notice] 10#10: start worker process 11`,
		`2026/11/30 12:40:02 [error] 11#11: *3 recv() failed (104: Connection reset by peer) while reading response header from upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://10.244.1.2:8080/work", host: "127.0.0.1:40001"`,
		`2026/11/30 12:40:03 [error] 11#11: *5 upstream prematurely closed connection while reading response header from upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://10.244.1.2:8080/work", host: "127.0.0.1:40001"`,
		`2026/11/30 12:40:04 [error] 11#11: *7 connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://10.244.1.3:8080/work", host: "127.0.0.1:40001"`,
		`2026/11/30 12:40:05 [error] 11#11: *9 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://be/work", host: "127.0.0.1:40001"`,
		`2026/11/30 12:40:06 [error] 11#11: *11 connect() failed (113: No route to host) while connecting to upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://10.244.1.4:8080/work", host: "127.0.0.1:40001"`,
		`2026/11/30 12:40:07 [error] 11#11: *13 connect() to 10.244.1.4:8080 failed (101: Network is unreachable) while connecting to upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://10.244.1.4:8080/work", host: "127.0.0.1:40001"`,
		`2026/11/30 12:40:08 [error] 11#11: *15 upstream timed out (110: Connection timed out) while connecting to upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://10.244.1.4:8080/work", host: "127.0.0.1:40001"`,
		`2026/11/30 12:40:39 [error] 11#11: *17 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: , request: "GET /work HTTP/1.1", upstream: "http://10.244.1.5:8080/work", host: "127.0.0.1:40001"`,
	)
	got, err := parseNginxLogs(access, errs)
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{Requests: 9, Status: map[int]int{200: 2, 502: 4, 503: 1, 504: 2}, Retried: 1, NoLiveUpstreams: 1, Backends: map[string]Backend{
		"10.244.1.2:8080": {Attempts: 3, BadGateway: 2, Aborted: 2, Reset: 1},
		"10.244.1.3:8080": {Attempts: 1, Refused: 1},
		"10.244.1.4:8080": {Attempts: 3, BadGateway: 2, Blackholed: 3},
		"10.244.1.5:8080": {Attempts: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// TestCountsSum: the records of the backends named, an unknown one adding
// nothing.
func TestCountsSum(t *testing.T) {
	c := Counts{Backends: map[string]Backend{
		"10.244.1.2:8080": {Attempts: 3, BadGateway: 2, Aborted: 2, Reset: 1},
		"10.244.1.3:8080": {Attempts: 2, Unavailable: 2, Refused: 1, Blackholed: 1},
		"10.244.1.4:8080": {Attempts: 5, Refused: 5},
	}}
	got := c.Sum("10.244.1.2:8080", "10.244.1.3:8080", "10.244.1.9:8080")
	want := Backend{Attempts: 5, BadGateway: 2, Unavailable: 2, Aborted: 2, Reset: 1, Refused: 1, Blackholed: 1}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestSlots: unchanged endpoints keep their slot (and pool); a freed slot
// is reused by the next new endpoint.
func TestSlots(t *testing.T) {
	var s slots
	gone, added, err := s.assign([]string{"10.244.1.2:8080", "10.244.1.3:8080"})
	if err != nil || len(gone) != 0 || !reflect.DeepEqual(added, []slotAddr{{1, "10.244.1.2", "8080"}, {2, "10.244.1.3", "8080"}}) {
		t.Fatalf("first: gone %v added %v err %v", gone, added, err)
	}
	gone, added, err = s.assign([]string{"10.244.1.3:8080", "10.244.1.4:8080"})
	if err != nil || !reflect.DeepEqual(gone, []int{1}) || !reflect.DeepEqual(added, []slotAddr{{1, "10.244.1.4", "8080"}}) {
		t.Fatalf("second: gone %v added %v err %v", gone, added, err)
	}
}

func TestCheckAnswer(t *testing.T) {
	if err := checkAnswer("IP changed from '127.0.0.1' to '10.244.1.2', port changed from '1' to '8080' by 'stats socket command'\n\n\n"); err != nil {
		t.Fatal(err)
	}
	if err := checkAnswer("No such server.\n\n"); err == nil {
		t.Fatal("an error answer was accepted")
	}
}
