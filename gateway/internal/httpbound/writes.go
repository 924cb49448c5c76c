// Package httpbound bounds what a client can hold of the gateway's HTTP
// side: each write of an answer (Writes, on every route: a client that
// stops reading is cut off), net/http's 100 Continue (bounded as a write),
// and, on a server set up by Configure, keep-alive connections left idle —
// with one watcher goroutine instead of a runtime timer per request. The
// body's read bound is net/http's ReadTimeout where the server sets it
// (ServerBoundsBody), else the front door's own deadline.
package httpbound

import (
	"io"
	"net/http"
	"time"
)

// Writes returns w, each of whose writes and flushes must end within
// d, so that a client that stops reading its answers is cut off instead of
// holding the answer, its share of the response budget and a goroutine for
// as long as it keeps the connection. Gateway.Handler bounds every route's
// answers so, not only /mcp's: a client can pipeline requests to any route
// and read nothing. The bound runs from the writes, not from the request,
// so an SSE stream that keeps being read is never cut; http.Server's
// WriteTimeout, which runs from the request, would cut it. Call the
// writer's Finish as the handler returns: the flush net/http does after it
// (an answer's last bytes, a status alone, a stream's end) is bounded too,
// not left with what remains of a deadline set long before. With
// "Expect: 100-continue" the first read of r's body is bounded as a write
// as well: net/http writes its 100 Continue there. A d of 0 bounds
// nothing.
//
// On a server set up by Configure the writer only notes when each
// write starts and ends, and the server's watcher cuts a write that takes
// too long: no runtime timer per answer. Elsewhere it sets write deadlines.
// net/http clears the deadline after the final flush, so the next request
// on a kept-alive connection starts without one. A deadline is moved on
// only when less than half of it is left, so each write has between d/2
// and d to end: setting it changes a runtime timer, which wakes an idle
// core to watch it, and a tools/call's one write and finish came within
// microseconds of each other. A writer without deadlines (not net/http's)
// is written to unbounded.
func Writes(w http.ResponseWriter, r *http.Request, d time.Duration) *Writer {
	dw := &Writer{ResponseWriter: w, d: d}
	if d <= 0 {
		return dw
	}
	if r.ProtoMajor == 1 {
		// One request at a time per connection: its writes are the
		// connection's. (HTTP/2 streams share one, and keep deadlines.)
		dw.wc = watched(r)
	}
	if r.Body != nil && r.Body != http.NoBody && r.Header.Get("Expect") != "" {
		r.Body = &continueBody{ReadCloser: r.Body, w: dw}
	}
	return dw
}

// Writer bounds each write and flush by d (nothing when d is 0):
// through its connection's watch when it has one, else by keeping a write
// deadline between d/2 and d ahead.
type Writer struct {
	http.ResponseWriter
	wc       *watchedConn             // nil: deadlines
	rc       *http.ResponseController // made at the first write: many answers are a status alone
	d        time.Duration
	deadline time.Time // the deadline set, zero before the first
}

// ctl is the controller of the writer underneath, made once.
func (w *Writer) ctl() *http.ResponseController {
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	return w.rc
}

// begin bounds a write about to start; end, after it, ends the bound.
func (w *Writer) begin() {
	switch {
	case w.d <= 0:
	case w.wc != nil:
		w.wc.writeSince.Store(time.Now().UnixNano())
	default:
		w.arm()
	}
}

func (w *Writer) end() {
	if w.wc != nil {
		w.wc.writeSince.Store(0)
	}
}

func (w *Writer) arm() {
	now := time.Now()
	if w.deadline.Sub(now) >= w.d/2 {
		return // more than half left
	}
	w.deadline = now.Add(w.d)
	w.ctl().SetWriteDeadline(w.deadline)
}

// finish bounds net/http's flush after the handler, which writes at least
// the status line. Through the watch, the connection going idle or closed
// ends the bound.
func (w *Writer) Finish() { w.begin() }

func (w *Writer) Write(p []byte) (int, error) {
	w.begin()
	n, err := w.ResponseWriter.Write(p)
	w.end()
	return n, err
}

func (w *Writer) Flush() {
	w.begin()
	w.ctl().Flush()
	w.end()
}

// continueBody bounds its first read as a write of w: net/http answers
// "Expect: 100-continue" there, with a write of its own.
type continueBody struct {
	io.ReadCloser
	w    *Writer
	read bool
}

func (b *continueBody) Read(p []byte) (int, error) {
	if b.read {
		return b.ReadCloser.Read(p)
	}
	b.read = true
	b.w.begin()
	n, err := b.ReadCloser.Read(p)
	b.w.end()
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServerBoundsBody reports whether the http.Server that received r already
// bounds the reading of its body by d or less: its ReadTimeout, which
// net/http sets as a read deadline from the request's start and clears once
// the body is read (mcpgate serve sets it to body_timeout). The front door's
// own deadline would then be two more timer changes per request for
// nothing.
func ServerBoundsBody(r *http.Request, d time.Duration) bool {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	return ok && srv.ReadTimeout > 0 && srv.ReadTimeout <= d
}
