package bench

import (
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	out := `Running 5s test @ http://10.244.1.2:8080/work
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   612.07us  301.18us   9.90ms   91.09%
    Req/Sec    12.98k   563.33    13.86k    74.00%
  64588 requests in 5.00s, 10.60MB read
  Socket errors: connect 0, read 3, write 0, timeout 1
  Non-2xx or 3xx responses: 2
Requests/sec:  12917.33
Transfer/sec:      2.12MB
`
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Requests: 64588, Errors: 6, Elapsed: 5 * time.Second}
	if r != want {
		t.Errorf("parseWrk = %+v, want %+v", r, want)
	}
}
