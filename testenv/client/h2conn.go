package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2conn is one connection of an H2 workload.
type h2conn struct {
	H2Conn
	sent    chan struct{} // closed once the opening frames are written
	framer  *http2.Framer
	writeMu sync.Mutex // the pinger and the reader both write frames
}

// errHeld ends an idle connection that lasted its hold.
var errHeld = errors.New("held for the whole duration")

func (c *h2conn) run(ctx context.Context, h H2) {
	c.Start = time.Now()
	defer func() { c.End = time.Now() }()
	sentOnce := sync.OnceFunc(func() { close(c.sent) })
	defer sentOnce()
	ctx, cancel := context.WithTimeout(ctx, h.Hold)
	defer cancel()
	conn, err := h.Dial(ctx, "tcp", h.Target)
	if err != nil {
		c.Outcome, c.Err = classify(err), err.Error()
		return
	}
	defer conn.Close()
	c.Local = conn.LocalAddr().String()
	_ = conn.SetDeadline(c.Start.Add(h.Hold))
	c.framer = http2.NewFramer(conn, conn)
	c.framer.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := c.open(conn); err != nil {
		c.fail(err)
		return
	}
	sentOnce()
	stopPings := make(chan struct{})
	defer close(stopPings)
	go c.ping(h.PingEvery, stopPings)
	c.fail(c.read())
}

// open writes the client preface, SETTINGS and, on a pending connection,
// the request on stream 1.
func (c *h2conn) open(conn net.Conn) error {
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return err
	}
	if err := c.framer.WriteSettings(); err != nil {
		return err
	}
	if c.Path == "" {
		return nil
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", c.Target}, {":path", c.Path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return c.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
}

// ping sends a PING every interval until stop.
func (c *h2conn) ping(every time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var data [8]byte
	for n := uint64(1); ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		binary.BigEndian.PutUint64(data[:], n)
		if c.write(func(f *http2.Framer) error { return f.WritePing(false, data) }) != nil {
			return // the reader sees the broken connection too
		}
	}
}

func (c *h2conn) write(w func(*http2.Framer) error) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return w(c.framer)
}

// read handles frames until the connection or the request ends; the error
// says how (nil: the response is complete).
func (c *h2conn) read() error {
	for {
		f, err := c.framer.ReadFrame()
		if err != nil {
			return err
		}
		done, err := c.handle(f)
		if done || err != nil {
			return err
		}
	}
}

// handle answers the server's SETTINGS and PINGs and follows stream 1;
// done once the response has ended.
func (c *h2conn) handle(f http2.Frame) (bool, error) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return false, c.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
		}
	case *http2.PingFrame:
		if f.IsAck() {
			c.Pings++
			return false, nil
		}
		return false, c.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
	case *http2.GoAwayFrame:
		c.GoAway = true
	case *http2.RSTStreamFrame:
		return true, streamReset{f.ErrCode}
	case *http2.MetaHeadersFrame:
		c.Status, _ = strconv.Atoi(f.PseudoValue("status"))
		return f.StreamEnded(), nil
	case *http2.DataFrame:
		return f.StreamEnded(), nil
	}
	return false, nil
}

type streamReset struct{ code http2.ErrCode }

func (e streamReset) Error() string { return "stream reset by the server: " + e.code.String() }

// fail records how the connection ended (nil: the response is complete).
func (c *h2conn) fail(err error) {
	var sr streamReset
	var ne net.Error
	switch {
	case err == nil && (c.Status < 200 || c.Status > 299):
		c.Outcome = HTTPStatus(c.Status)
	case err == nil:
		c.Outcome = OK
	case c.Path == "" && errors.As(err, &ne) && ne.Timeout():
		c.Outcome, c.Err = OK, errHeld.Error()
	case errors.As(err, &sr):
		c.Outcome, c.Err = StreamReset, err.Error()
	case c.GoAway && classify(err) == EOF:
		c.Outcome, c.Err = GoneAway, err.Error()
	case c.GoAway && c.Path == "" && classify(err) == Reset:
		// An idle connection told to go away, whose last frame (a PING or
		// SETTINGS ACK answering the server's shutdown) reached a socket
		// the server had just closed: its kernel answers with a RST.
		// Nothing was in flight; it went away all the same.
		c.Outcome, c.Err = GoneAway, err.Error()
	default:
		c.Outcome, c.Err = classify(err), err.Error()
	}
}
