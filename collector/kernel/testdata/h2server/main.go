// Command h2server is the HTTP/2 cleartext (prior knowledge) and HTTP/1.1
// server of the collector's kernel tests: "/" answers at once, "/slow" holds the request
// until the client goes away, "/stream" writes and flushes a chunk every
// 50 ms until the client goes away. Every "/slow" appends one byte to the
// -held file when it starts holding, so the test knows the server has the
// request without sleeping.
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := flag.String("addr", "", "listen address")
	held := flag.String("held", "", "file that gets one byte per held /slow request")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		if err := appendByte(*held); err != nil {
			log.Fatal(err)
		}
		<-r.Context().Done()
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for {
			w.Write([]byte("chunk\n"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	// HTTP/1.1 too: the pipelining test speaks it; an HTTP/2 client is
	// told apart by its preface.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Addr: *addr, Handler: mux, Protocols: &protocols}
	log.Fatal(srv.ListenAndServe())
}

func appendByte(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte{1}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
