package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionLife keeps, for a stateful gateway whose front door answers calls
// on a session itself (the fast path, see frontDoor.sessionFastPath), what
// go-sdk's StreamableHTTPHandler would otherwise keep alone, because it sees
// only the requests it serves:
//
//   - which sessions have initialized: go-sdk (v1.8.0) answers a call on a
//     session only once its initialize has succeeded (ServerSession.handle),
//     so the fast path takes a session's calls only from then on;
//   - session_timeout. go-sdk's idle timer (StreamableHTTPOptions.
//     SessionTimeout) runs while no POST of the session is being served, and
//     only the POSTs it serves stop and restart it: a session whose calls the
//     fast path answered would be closed while in use. So go-sdk's timer is
//     off (sdkHandler) and this one runs instead, with go-sdk's rule: it
//     runs while no POST naming the session is being served (whoever
//     serves it), and when it fires the session is closed
//     (ServerSession.Close: go-sdk forgets it and answers its id with 404).
//     A GET (the standalone SSE stream) keeps no session alive, as in go-sdk.
//
// A session the Front closes (CloseSessions, the oldest retired gateway's)
// is forgotten as it is closed (servedGateway.closeSessions). One closed by
// go-sdk for another reason (a DELETE) is forgotten when the front door
// sees go-sdk answer 404 or 204 for it, or when the session book next
// prunes against go-sdk's sessions (sessionBook.reserve, at every new
// session).
// Safe for concurrent use; a nil *sessionLife (go-sdk keeps the sessions
// alone) records nothing and finds no session ready.
type sessionLife struct {
	timeout time.Duration // session_timeout; 0: sessions never expire

	mu     sync.Mutex
	live   map[string]*lifeEntry // session id → its state, once initialized
	closed bool
	// expired are told of each session closed by the timer: the session
	// books (one per Gateway.Handler) forget it.
	expired []func(id string)
}

type lifeEntry struct {
	ss    *mcp.ServerSession
	posts int         // POSTs naming the session being served
	timer *time.Timer // nil: no timeout
	// idle is when the last POST naming the session ended (or it
	// initialized): a timer that fired as a POST began and ended is
	// stale when this is later than the timeout ago.
	idle time.Time
}

func newSessionLife(timeout time.Duration) *sessionLife {
	return &sessionLife{timeout: timeout, live: map[string]*lifeEntry{}}
}

// middleware records each session whose initialize succeeded, and starts
// its idle timer.
func (l *sessionLife) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method == "initialize" && err == nil {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.ID() != "" {
				l.add(ss)
			}
		}
		return res, err
	}
}

// add records ss as initialized. Its initialize POST is still being served
// (go-sdk runs the handler within it), but the timer starts now: it is
// session_timeout long, and an initialize answer is written at once.
func (l *sessionLife) add(ss *mcp.ServerSession) {
	id := ss.ID()
	e := &lifeEntry{ss: ss, idle: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.live[id] != nil {
		return // a second initialize on one session: go-sdk refuses it
	}
	if l.timeout > 0 {
		e.timer = time.AfterFunc(l.timeout, func() { l.expire(id, e) })
	}
	l.live[id] = e
}

// ready reports whether session id has initialized and is not known to be
// closed.
func (l *sessionLife) ready(id string) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	_, ok := l.live[id]
	l.mu.Unlock()
	return ok
}

// begin marks a POST naming session id as being served: the idle timer
// stops until the last such POST ends. It returns the function that ends
// it. A session not (yet) initialized has no timer to stop: go-sdk closes
// one whose initialize failed.
func (l *sessionLife) begin(id string) (end func()) {
	if l == nil {
		return func() {}
	}
	l.mu.Lock()
	e := l.live[id]
	if e == nil {
		l.mu.Unlock()
		return func() {}
	}
	if e.posts++; e.posts == 1 && e.timer != nil {
		e.timer.Stop()
	}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if e.posts--; e.posts == 0 && e.timer != nil && l.live[id] == e {
			e.idle = time.Now()
			e.timer.Reset(l.timeout)
		}
	}
}

// expire closes session id when its timer fires and no POST naming it is
// being served (one that began as the timer fired restarts it when it ends).
func (l *sessionLife) expire(id string, e *lifeEntry) {
	l.mu.Lock()
	if l.live[id] != e || e.posts > 0 || time.Since(e.idle) < l.timeout {
		l.mu.Unlock()
		return // in use, or used since: the timer has been restarted
	}
	delete(l.live, id)
	expired := l.expired
	l.mu.Unlock()
	e.ss.Close()
	for _, f := range expired {
		f(id)
	}
}

// onExpired has f told of each session the timer closes.
func (l *sessionLife) onExpired(f func(id string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expired = append(l.expired, f)
}

// forget drops session id: go-sdk has closed it (a DELETE, a 404, a prune).
func (l *sessionLife) forget(id string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.live[id]; e != nil {
		if e.timer != nil {
			e.timer.Stop()
		}
		delete(l.live, id)
	}
}

// close stops every timer: the gateway is closing, and its sessions with
// it. Nothing is recorded after.
func (l *sessionLife) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for id, e := range l.live {
		if e.timer != nil {
			e.timer.Stop()
		}
		delete(l.live, id)
	}
}

// size is the number of sessions recorded.
func (l *sessionLife) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.live)
}
