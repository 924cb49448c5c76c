package state

import (
	"errors"
	"testing"
	"time"
)

// TestTasksGetScoped: a task record is returned only to its own caller;
// another caller asking for its id gets ErrNoTask, as for an id that does
// not exist, so that holding someone's task id reveals nothing (red-team
// finding 5 of issue 24).
func TestTasksGetScoped(t *testing.T) {
	r, _ := openRedis(t)
	for _, tt := range []struct {
		name  string
		store Tasks
	}{{"memory", NewMemoryTasks()}, {"redis", r.Tasks()}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Now().Truncate(time.Millisecond)
			if err := tt.store.Put(ctx, TaskRecord{ID: "b1", Caller: "bob", Tool: "demo_slow", Status: "working", Created: now, Updated: now, TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				caller string
				want   error
			}{{"bob", nil}, {"mallory", ErrNoTask}, {"", ErrNoTask}} {
				got, err := tt.store.Get(ctx, c.caller, "b1")
				if !errors.Is(err, c.want) || (c.want == nil && (got == nil || got.Caller != "bob")) || (c.want != nil && got != nil) {
					t.Errorf("Get(%q, b1) = %+v, %v; want %v", c.caller, got, err, c.want)
				}
			}
		})
	}
}
