//go:build linux

package app

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Caller is the side-by-side load generator's gRPC client, written on
// HTTP/2 frames so that it costs the shared cores as little as a client
// can: one connection; every request's HEADERS block encoded once (never
// indexed, so it is the same bytes on every stream) and its DATA the
// gRPC-framed message marshalled once; the frames of the callers waiting
// to write go out in one flush (one write system call); one goroutine
// reads every answer, checks the message's overall_code and the
// trailers' grpc-status, and wakes the caller. It speaks what
// ShouldRateLimit needs and no more: no deadlines, no compression, no
// retries; it answers the server's SETTINGS and PINGs and keeps the
// connection's receive window open, and a GOAWAY or a broken
// connection fails every call from then on. The reader writes those
// answers under the writers' lock: a writer blocked on a full socket
// would stall it, which 64 requests of a few dozen bytes in flight
// cannot cause.
//
// Indexed (the "h2i" generator) encodes the headers as Envoy's and
// grpc-go's clients do, through HPACK's dynamic table: the first
// request's block adds them to the table, every later one names them by
// index (a byte each), which the server decodes without Huffman-decoding
// six literals.
type h2Caller struct {
	conn  net.Conn
	hdr   []byte // the HEADERS block of every request
	first []byte // the first request's (hdr unless indexed)

	wmu     sync.Mutex // the writer: stream ids in order, frames whole
	bw      *bufio.Writer
	fr      *http2.Framer
	next    uint32
	pending atomic.Int32 // callers writing or waiting to write

	mu     sync.Mutex
	calls  map[uint32]*h2Call
	broken error
}

type h2Call struct {
	ok   bool // the message was overall_code OK
	done chan bool
}

// dialH2 connects to the gRPC server at addr; indexed: see h2Caller.
func dialH2(t *testing.T, addr string, indexed bool) *h2Caller {
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func() []byte {
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", shouldRateLimit},
			{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1], Sensitive: !indexed}))
		}
		return bytes.Clone(hb.Bytes())
	}
	first := block()
	hdr := block() // the same bytes when never indexed; indices when indexed
	c := &h2Caller{conn: conn, hdr: hdr, first: first, bw: bufio.NewWriterSize(conn, 64<<10), next: 1, calls: map[uint32]*h2Call{}}
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(conn, 64<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, err = c.bw.WriteString(http2.ClientPreface)
	require.NoError(t, err)
	require.NoError(t, c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	require.NoError(t, c.fr.WriteWindowUpdate(0, 1<<30))
	require.NoError(t, c.bw.Flush())
	go c.read()
	return c
}

// grpcFrame is msg with gRPC's length prefix (uncompressed).
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

// call sends one request (a gRPC frame) and reports whether it was
// answered overall_code OK with grpc-status 0.
// cl is the calling goroutine's own, reused (one call at a time; done
// has room for one answer).
func (c *h2Caller) call(frame []byte, cl *h2Call) bool {
	cl.ok = false
	c.pending.Add(1)
	c.wmu.Lock()
	id := c.next
	c.next += 2
	c.mu.Lock()
	broken := c.broken
	if broken == nil {
		c.calls[id] = cl
	}
	c.mu.Unlock()
	if broken == nil {
		hdr := c.hdr
		if id == 1 { // written first: the stream ids go out in order
			hdr = c.first
		}
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr, EndHeaders: true})
		c.fr.WriteData(id, true, frame)
	}
	if c.pending.Add(-1) == 0 { // the last writer of a burst flushes it
		if err := c.bw.Flush(); err != nil {
			c.fail(err)
		}
	}
	c.wmu.Unlock()
	if broken != nil {
		return false
	}
	return <-cl.done
}

// caller is loadClient's: a function sending msg from one goroutine.
func (c *h2Caller) caller(msg []byte) func() bool {
	frame := grpcFrame(msg)
	cl := &h2Call{done: make(chan bool, 1)}
	return func() bool { return c.call(frame, cl) }
}

// control writes a frame of the connection's own (a SETTINGS or PING
// acknowledgement, a WINDOW_UPDATE) and flushes it.
func (c *h2Caller) control(write func() error) {
	c.wmu.Lock()
	err := write()
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
	}
}

// fail breaks the connection: every call waiting and to come answers false.
func (c *h2Caller) fail(err error) {
	c.mu.Lock()
	if c.broken == nil {
		c.broken = err
	}
	calls := c.calls
	c.calls = map[uint32]*h2Call{}
	c.mu.Unlock()
	for _, cl := range calls {
		cl.done <- false
	}
}

func (c *h2Caller) finish(id uint32, ok bool) {
	c.mu.Lock()
	cl := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if cl != nil {
		cl.done <- ok && cl.ok
	}
}

// read is the connection's one reader.
func (c *h2Caller) read() {
	var unacked uint32 // bytes received since the last connection WINDOW_UPDATE
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.fail(err)
			return
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			d := f.Data()
			if unacked += f.Length; unacked >= 1<<20 {
				n := unacked
				unacked = 0
				c.control(func() error { return c.fr.WriteWindowUpdate(0, n) })
			}
			// overall_code OK (rawCodec.Unmarshal) after the 5-byte gRPC
			// prefix; an answer split across DATA frames (neither server
			// splits a message this small) counts as not OK, failing the
			// test rather than miscounting
			if len(d) >= 7 && d[5] == 0x08 && d[6] == 0x01 {
				c.mu.Lock()
				if cl := c.calls[f.StreamID]; cl != nil {
					cl.ok = true
				}
				c.mu.Unlock()
			}
			if f.StreamEnded() {
				c.finish(f.StreamID, false)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() { // the trailers (or a trailers-only error)
				ok := false
				for _, hf := range f.RegularFields() {
					if hf.Name == "grpc-status" {
						ok = hf.Value == "0"
					}
				}
				c.finish(f.StreamID, ok)
			}
		case *http2.RSTStreamFrame:
			c.finish(f.StreamID, false)
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.control(c.fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				c.control(func() error { return c.fr.WritePing(true, data) })
			}
		case *http2.GoAwayFrame:
			c.fail(errors.New("GOAWAY"))
			return
		}
	}
}
