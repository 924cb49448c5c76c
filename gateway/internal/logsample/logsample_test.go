package logsample

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lines is a concurrency-safe buffer of JSON log lines.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		out = append(out, rec)
	}
	return out
}

// step is what a test does at one moment: wait, then log n records.
type step struct {
	wait  time.Duration
	n     int
	level slog.Level
	msg   string
	tool  string
	cause string
}

// TestSampling: per window of one second, per level, message, tool and
// cause, the first record is written and the others counted, then one
// summary with the count at the window's end; records below warn, or of
// another kind, pass. Time is synctest's: the windows are exact.
func TestSampling(t *testing.T) {
	warn := func(wait time.Duration, n int, tool, cause string) step {
		return step{wait, n, slog.LevelWarn, "tool call", tool, cause}
	}
	for _, c := range []struct {
		name     string
		steps    []step
		want     []string // msg/tool/dropped of each line
		anyOrder bool     // summaries written at one instant come in any order
	}{
		{"one", []step{warn(0, 1, "a", "refused")}, []string{"tool call/a/"}, false},
		{"burst", []step{warn(0, 7262, "a", "refused")}, []string{"tool call/a/", "repeated log lines dropped/a/7261"}, false},
		{"two tools", []step{warn(0, 3, "a", "refused"), warn(0, 3, "b", "refused")},
			[]string{"tool call/a/", "tool call/b/", "repeated log lines dropped/a/2", "repeated log lines dropped/b/2"}, true},
		{"two causes", []step{warn(0, 2, "a", "refused"), warn(0, 2, "a", "timeout")},
			[]string{"tool call/a/", "tool call/a/", "repeated log lines dropped/a/1", "repeated log lines dropped/a/1"}, true},
		{"ports are one cause", []step{warn(0, 1, "a", "read tcp 10.0.0.1:51234: reset"), warn(0, 1, "a", "read tcp 10.0.0.1:40001: reset")},
			[]string{"tool call/a/", "repeated log lines dropped/a/1"}, false},
		{"every second", []step{warn(0, 5, "a", "refused"), warn(1500*time.Millisecond, 5, "a", "refused")},
			[]string{"tool call/a/", "repeated log lines dropped/a/4", "tool call/a/", "repeated log lines dropped/a/4"}, false},
		{"window is one second", []step{warn(0, 1, "a", "refused"), warn(999*time.Millisecond, 1, "a", "refused"), warn(time.Millisecond, 1, "a", "refused")},
			[]string{"tool call/a/", "repeated log lines dropped/a/1", "tool call/a/"}, false},
		{"spaced out", []step{warn(0, 1, "a", "refused"), warn(2*time.Second, 1, "a", "refused")},
			[]string{"tool call/a/", "tool call/a/"}, false},
		{"info passes", []step{{0, 3, slog.LevelInfo, "playbook call", "a", ""}}, []string{"playbook call/a/", "playbook call/a/", "playbook call/a/"}, false},
		{"error is its own kind", []step{warn(0, 2, "a", "x"), {0, 2, slog.LevelError, "tool call", "a", "x"}},
			[]string{"tool call/a/", "tool call/a/", "repeated log lines dropped/a/1", "repeated log lines dropped/a/1"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out lines
				log := slog.New(New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}), nil))
				for _, s := range c.steps {
					time.Sleep(s.wait)
					for range s.n {
						attrs := []any{"tool", s.tool, "upstream", "api"}
						if s.cause != "" {
							attrs = append(attrs, "cause", s.cause)
						}
						log.Log(context.Background(), s.level, s.msg, attrs...)
					}
				}
				time.Sleep(time.Minute) // every window ends
				synctest.Wait()
				var got []string
				for _, r := range out.records(t) {
					line := r["msg"].(string) + "/" + r["tool"].(string) + "/"
					if d, ok := r["dropped"]; ok {
						line += jsonNum(d)
						if r["message"] == nil || r["window"] == nil {
							t.Errorf("summary without message or window: %v", r)
						}
					}
					got = append(got, line)
				}
				want := c.want
				if c.anyOrder {
					want = slices.Sorted(slices.Values(want))
					got = slices.Sorted(slices.Values(got))
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		})
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSamplingWithAttrs: kind attributes given to With count, and the
// summary is written by the handler that wrote the first line (with its
// attributes).
func TestSamplingWithAttrs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lines
		base := slog.New(New(slog.NewJSONHandler(&out, nil), nil))
		a, b := base.With("upstream", "a"), base.With("upstream", "b")
		for range 3 {
			a.Warn("down", "cause", "refused")
			b.Warn("down", "cause", "refused")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		recs := out.records(t)
		if len(recs) != 4 {
			t.Fatalf("%d lines: %v", len(recs), recs)
		}
		for _, r := range recs[2:] {
			if r["msg"] != SummaryMessage || r["dropped"] != 2.0 || r["upstream"] == nil {
				t.Errorf("summary %v", r)
			}
		}
	})
}

// TestSamplingBound: past MaxKinds a new kind is written unsampled, and
// kinds whose window ended make room again.
func TestSamplingBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lines
		log := slog.New(New(slog.NewJSONHandler(&out, nil), &Options{MaxKinds: 2}))
		for _, tool := range []string{"a", "b", "c", "c"} {
			log.Warn("x", "tool", tool)
		}
		if n := len(out.records(t)); n != 4 {
			t.Errorf("%d lines: a third kind over the bound must pass unsampled", n)
		}
		time.Sleep(time.Second)
		log.Warn("x", "tool", "d")
		log.Warn("x", "tool", "d")
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(out.records(t)); n != 6 { // d, then its summary
			t.Errorf("%d lines after the windows ended, want 6", n)
		}
	})
}
