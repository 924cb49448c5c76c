package gateway

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// listAll pages through tasks/list and returns the tasks by id, in order.
func (te *taskEnv) listAll(t *testing.T, authorization string) ([]string, map[string]map[string]any) {
	t.Helper()
	var ids []string
	byID := map[string]map[string]any{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("tasks/list: more than 10 pages")
		}
		params := `{}`
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		res := te.must(t, authorization, "tasks/list", params)
		for _, raw := range res["tasks"].([]any) {
			task := raw.(map[string]any)
			id := task["taskId"].(string)
			if byID[id] != nil {
				t.Fatalf("task %s listed twice", id)
			}
			ids = append(ids, id)
			byID[id] = task
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			return ids, byID
		}
		if len(res["tasks"].([]any)) != taskListPage {
			t.Errorf("a page of %d tasks before the last, want %d", len(res["tasks"].([]any)), taskListPage)
		}
		cursor = next
	}
}

// TestTaskList: tasks/list lists the caller's own tasks, newest first, in
// pages, each with the status tasks/get would give (a run that ended
// without anyone asking is polled, not shown working); another caller's
// list, and another caller's task as a cursor, show none of them.
func TestTaskList(t *testing.T) {
	te := taskGateway(t, 10*time.Millisecond, time.Minute, TasksConfig{}, nil, false)
	const alice, bob = "Bearer alice", "Bearer bob"

	if ids, _ := te.listAll(t, alice); len(ids) != 0 {
		t.Fatalf("a caller with no tasks lists %v", ids)
	}
	var made []string
	for i := range taskListPage + 2 {
		id, _ := te.create(t, alice, "demo_fast", fmt.Sprintf(`{"name":"n%d"}`, i))
		made = append(made, id)
	}
	bobs, _ := te.create(t, bob, "demo_fast", `{"name":"bob"}`)

	// Nobody asked tasks/get: the records say working, and the list polls
	// the engine for those (a record never updated stays working).
	var ids []string
	var byID map[string]map[string]any
	waitFor(t, "alice's tasks to be listed completed", func() bool {
		ids, byID = te.listAll(t, alice)
		for _, id := range ids {
			if byID[id]["status"] != "completed" {
				return false
			}
		}
		return true
	})
	if !sameSet(ids, made) {
		t.Fatalf("alice lists %d tasks, want her %d", len(ids), len(made))
	}
	var prev time.Time
	for i, id := range ids {
		task := byID[id]
		created, err := time.Parse(time.RFC3339Nano, task["createdAt"].(string))
		if err != nil || task["ttl"] != 60000.0 || task["pollInterval"] == nil {
			t.Fatalf("listed %v (%v)", task, err)
		}
		if i > 0 && created.After(prev) {
			t.Fatalf("task %d was created after the one listed before it: not newest first", i)
		}
		prev = created
	}
	if ids, _ := te.listAll(t, bob); !slices.Equal(ids, []string{bobs}) {
		t.Errorf("bob lists %v, want only his %s", ids, bobs)
	}
	for _, cursor := range []string{"nonsense", bobs} {
		_, e := te.send(t, alice, "tasks/list", fmt.Sprintf(`{"cursor":%q}`, cursor), nil)
		if e == nil || e["code"] != -32602.0 {
			t.Errorf("cursor %.20s: %v, want -32602", cursor, e)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
