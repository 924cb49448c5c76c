// Package logsample keeps a burst of one failure from flooding the log: a
// slog.Handler that passes the first record of a kind per window (one
// second) and, when the window ends, one summary record with the count of
// the records of that kind it dropped.
//
// Issue 24 measured why: during a 4 s upstream outage one replica wrote
// 7,262 warning lines, one per failed tool call, all saying the same thing.
// Sampled, the same outage writes two lines per tool and cause per second:
// the first failure as it was, and "repeated log lines dropped" with the
// count.
package logsample

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Defaults of [Options].
const (
	// DefaultWindow is how long a kind of record is sampled after its first
	// one: the "per second".
	DefaultWindow = time.Second
	// DefaultMaxKinds bounds the kinds tracked at once. A kind is a
	// message with a tool, an upstream and a cause: bounded by the catalog
	// and the ways a call fails, but a cause may be new on every call (see
	// causeKey). Past the bound, a record of a new kind is passed
	// unsampled: a first line is never lost to the bound.
	DefaultMaxKinds = 4096
)

// Options configures a [Handler]. The zero value is ready to use.
type Options struct {
	// Window is how long after a kind's first record the others of that
	// kind are counted, not written. Default DefaultWindow.
	Window time.Duration
	// MinLevel is the least level sampled; records below it pass as they
	// are (a debug log asked for every line). Nil: slog.LevelWarn, the
	// failure lines.
	MinLevel slog.Leveler
	// MaxKinds bounds the kinds tracked at once. Default DefaultMaxKinds.
	MaxKinds int
}

// SummaryMessage is the message of the record that says how many records
// of a kind a window dropped.
const SummaryMessage = "repeated log lines dropped"

// The attributes that make a record's kind, besides its level and
// message: the tool, the upstream and the cause of a failed call.
var kindAttrs = [...]string{"tool", "upstream", "cause"}

// Handler samples the records it passes to another handler (see the
// package doc). Safe for concurrent use; records below MinLevel cost one
// comparison more than the next handler's own.
type Handler struct {
	next   slog.Handler
	st     *state
	prefix [len(kindAttrs)]string // kind attributes from WithAttrs
	group  string                 // WithGroup's names: attributes in a group are not the kind's
}

// state is shared by a Handler and the handlers WithAttrs and WithGroup
// derive from it: one log, one set of windows.
type state struct {
	window   time.Duration
	minLevel slog.Level
	maxKinds int

	mu    sync.Mutex
	kinds map[kind]*entry
}

// kind is what makes two records the same for sampling.
type kind struct {
	level slog.Level
	msg   string
	attrs [len(kindAttrs)]string
}

// entry is one kind's window.
type entry struct {
	start   time.Time
	dropped int
	first   slog.Record  // what the summary repeats: message and kind attributes
	h       slog.Handler // the handler that wrote the first record
	timer   *time.Timer  // writes the summary at the window's end; nil until one is dropped
	// summarized: the summary is written, or being written (by the timer,
	// or by the next window's first record, whichever comes first).
	summarized bool
	// written is closed once the summary is written: the next window's
	// first record, when the timer took the summary, waits for it, so the
	// log reads "first line, summary, next first line" in that order.
	// Made with the timer.
	written chan struct{}
}

// New returns a Handler that passes what it does not drop to next.
func New(next slog.Handler, opts *Options) *Handler {
	st := &state{window: DefaultWindow, minLevel: slog.LevelWarn, maxKinds: DefaultMaxKinds, kinds: map[kind]*entry{}}
	if opts != nil {
		if opts.Window > 0 {
			st.window = opts.Window
		}
		if opts.MinLevel != nil {
			st.minLevel = opts.MinLevel.Level()
		}
		if opts.MaxKinds > 0 {
			st.maxKinds = opts.MaxKinds
		}
	}
	return &Handler{next: next, st: st}
}

// Enabled is the next handler's.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// WithAttrs derives a handler whose records count the kind attributes of
// as as their own.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	d := *h
	d.next = h.next.WithAttrs(as)
	if h.group == "" {
		for _, a := range as {
			d.setKind(&d.prefix, a)
		}
	}
	return &d
}

// WithGroup derives a handler whose attributes are in group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	d := *h
	d.next = h.next.WithGroup(name)
	if name != "" {
		d.group += name + "."
	}
	return &d
}

// setKind records a in attrs when it is one of kindAttrs.
func (h *Handler) setKind(attrs *[len(kindAttrs)]string, a slog.Attr) {
	for i, k := range kindAttrs {
		if a.Key == k {
			v := a.Value.Resolve().String()
			if k == "cause" {
				v = causeKey(v)
			}
			attrs[i] = v
		}
	}
}

// Handle writes r, or counts it when a record of its kind was written less
// than a window ago.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	st := h.st
	if r.Level < st.minLevel {
		return h.next.Handle(ctx, r)
	}
	k := kind{level: r.Level, msg: r.Message, attrs: h.prefix}
	if h.group == "" {
		r.Attrs(func(a slog.Attr) bool {
			h.setKind(&k.attrs, a)
			return true
		})
	}
	now := time.Now()
	st.mu.Lock()
	e := st.kinds[k]
	// A window whose summary is taken counts no more: what it dropped is
	// written. (A record timed just before the window's end can reach
	// the lock after the timer.)
	if e != nil && now.Sub(e.start) < st.window && !e.summarized {
		e.dropped++
		if e.timer == nil {
			e.written = make(chan struct{})
			e.timer = time.AfterFunc(e.start.Add(st.window).Sub(now), func() { st.flush(k, e) })
		}
		st.mu.Unlock()
		return nil
	}
	// A new window. The last one's summary, if its timer has not taken it
	// yet, is written now, before this window's first line; if the timer
	// took it, this line waits until it is written.
	var last *entry
	var written chan struct{}
	if e != nil && e.timer != nil {
		if !e.summarized {
			e.timer.Stop()
			e.summarized = true // its timer, if it has fired, writes nothing
			last = e
		}
		written = e.written
	}
	if e == nil && len(st.kinds) >= st.maxKinds {
		st.prune(now)
	}
	if e != nil || len(st.kinds) < st.maxKinds {
		st.kinds[k] = &entry{start: now, first: r.Clone(), h: h.next}
	}
	st.mu.Unlock()
	if last != nil {
		st.summary(last, last.dropped)
		close(last.written)
	}
	if written != nil {
		<-written
	}
	return h.next.Handle(ctx, r)
}

// prune forgets the kinds whose window has ended with nothing dropped
// (those with drops leave when their summary is written). st.mu is held.
func (st *state) prune(now time.Time) {
	for k, e := range st.kinds {
		if e.timer == nil && now.Sub(e.start) >= st.window {
			delete(st.kinds, k)
		}
	}
}

// flush writes e's summary, at the end of its window, and then forgets it
// unless a new window of its kind has begun. e stays known while its
// summary is written, so that a record of its kind waits for the summary.
func (st *state) flush(k kind, e *entry) {
	st.mu.Lock()
	done := e.summarized
	e.summarized = true
	n := e.dropped
	st.mu.Unlock()
	if !done {
		st.summary(e, n)
		close(e.written)
	}
	st.mu.Lock()
	if st.kinds[k] == e {
		delete(st.kinds, k)
	}
	st.mu.Unlock()
}

// summary writes the record that says e's window dropped n records.
func (st *state) summary(e *entry, n int) {
	r := slog.NewRecord(time.Now(), e.first.Level, SummaryMessage, 0)
	r.AddAttrs(slog.String("message", e.first.Message))
	e.first.Attrs(func(a slog.Attr) bool {
		for _, name := range kindAttrs {
			if a.Key == name {
				r.AddAttrs(a)
			}
		}
		return true
	})
	r.AddAttrs(slog.Int("dropped", n), slog.Duration("window", st.window))
	_ = e.h.Handle(context.Background(), r) // nowhere to report a failed write
}

// causeKey is a cause as a kind: its runs of digits as one '#', so that the
// ephemeral port or the byte count in "read tcp 10.0.0.1:51234->…:
// connection reset" does not make each failure a kind of its own. The line
// written keeps the cause as it was.
func causeKey(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	digits := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if '0' <= c && c <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteByte(c)
	}
	return b.String()
}
