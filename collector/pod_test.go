package collector

import "testing"

const testCID = "3f4b1c2d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"

func TestTrimContainerID(t *testing.T) {
	for in, want := range map[string]string{
		"containerd://" + testCID: testCID, "cri-o://" + testCID: testCID, testCID: testCID, "": "",
	} {
		if got := TrimContainerID(in); got != want {
			t.Errorf("TrimContainerID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHTTP2PortName(t *testing.T) {
	for name, want := range map[string]bool{
		"grpc": true, "grpc-web": true, "http2": true, "h2c": true, "h2c-api": true,
		"http": false, "https": false, "tcp-grpc": false, "": false, "metrics": false,
	} {
		if got := HTTP2PortName(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}
