package httpbound

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// fakeConn records what the watcher does to a connection.
type fakeConn struct {
	net.Conn
	write, read time.Time
	closed      bool
}

func (c *fakeConn) SetWriteDeadline(t time.Time) error { c.write = t; return nil }
func (c *fakeConn) SetReadDeadline(t time.Time) error  { c.read = t; return nil }
func (c *fakeConn) Close() error                       { c.closed = true; return nil }

// TestConnWatchSweep: a sweep cuts the writes under way for longer than the
// write bound, gives the connections idle for longer than the idle bound
// their last read deadline (once: a later sweep does not move it) or closes
// them when there is no header grace, and touches nothing else; a bound of
// 0 is no bound.
func TestConnWatchSweep(t *testing.T) {
	const bound, grace = time.Second, 10 * time.Second
	now := time.Now()
	long, short := now.UnixNano()-int64(2*bound), now.UnixNano()-int64(bound/2)
	tests := []struct {
		name                  string
		write, idle, grace    time.Duration
		writeSince, idleSince int64
		wantCut, wantClosed   bool
		wantRead              time.Time
	}{
		{"nothing under way", bound, bound, grace, 0, 0, false, false, time.Time{}},
		{"write within its bound", bound, bound, grace, short, 0, false, false, time.Time{}},
		{"write past its bound", bound, bound, grace, long, 0, true, false, time.Time{}},
		{"idle within its bound", bound, bound, grace, 0, short, false, false, time.Time{}},
		{"idle past its bound", bound, bound, grace, 0, long, false, false, now.Add(grace)},
		{"idle past its bound, no header grace", bound, bound, 0, 0, long, false, true, time.Time{}},
		{"no write bound", 0, bound, grace, long, 0, false, false, time.Time{}},
		{"no idle bound", bound, 0, grace, 0, long, false, false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &connWatch{write: tt.write, idle: tt.idle, grace: tt.grace}
			fc := &fakeConn{}
			wc := &watchedConn{c: fc}
			wc.writeSince.Store(tt.writeSince)
			wc.idleSince.Store(tt.idleSince)
			w.conns.Store(fc, wc)
			w.sweep(now)
			if cut := !fc.write.IsZero() && fc.write.Before(now); cut != tt.wantCut || wc.cut.Load() != tt.wantCut {
				t.Errorf("write cut: %v (flag %v), want %v", cut, wc.cut.Load(), tt.wantCut)
			}
			if fc.closed != tt.wantClosed {
				t.Errorf("closed: %v, want %v", fc.closed, tt.wantClosed)
			}
			if !fc.read.Equal(tt.wantRead) {
				t.Errorf("read deadline %v, want %v", fc.read, tt.wantRead)
			}
			if !tt.wantRead.IsZero() {
				fc.read = time.Time{}
				w.sweep(now.Add(bound))
				if !fc.read.IsZero() {
					t.Errorf("a later sweep moved the read deadline to %v", fc.read)
				}
			}
		})
	}
}

// TestConnWatchStates: the states net/http reports start and end the idle
// bound and the final flush's write bound; a request whose write was cut
// closes its connection as it ends, so the cut's deadline cannot reach the
// next request; a closed or hijacked connection is forgotten.
func TestConnWatchStates(t *testing.T) {
	w := &connWatch{write: time.Second, idle: time.Second}
	fc := &fakeConn{}
	wc := &watchedConn{c: fc}
	w.conns.Store(fc, wc)
	wc.writeSince.Store(1) // the handler returned: its last flush is under way
	w.state(fc, http.StateIdle)
	if wc.writeSince.Load() != 0 || wc.idleSince.Load() == 0 || fc.closed {
		t.Errorf("idle: writeSince %d, idleSince %d, closed %v; want the write ended and the idle begun", wc.writeSince.Load(), wc.idleSince.Load(), fc.closed)
	}
	w.state(fc, http.StateActive)
	if wc.idleSince.Load() != 0 {
		t.Error("active: still idle")
	}
	wc.cut.Store(true)
	w.state(fc, http.StateIdle)
	if !fc.closed {
		t.Error("a request whose write was cut ended and left its connection open")
	}
	for _, s := range []http.ConnState{http.StateClosed, http.StateHijacked} {
		w.conns.Store(fc, wc)
		w.state(fc, s)
		if _, ok := w.conns.Load(fc); ok {
			t.Errorf("%s: the connection is still watched", s)
		}
	}
	w.state(fc, http.StateIdle) // unknown now: nothing to do, no panic
}

// watchedServer serves frontDoc (the recorder upstream) with cfg on a
// server whose connections have small send buffers; watched: set up by
