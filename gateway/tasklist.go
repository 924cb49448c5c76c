package gateway

import (
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpgate/mcpgate/gateway/internal/caller"
)

// tasks/list (protocol 2025-11-25) lists the caller's own tasks from the
// store of task records (Gateway.TaskRecords: this process's memory by
// default, Redis with state.backend redis, so that any replica of a fleet
// lists the tasks any other made). What it chose:
//   - The caller is who made the task (package caller: the verified
//     subject, else the Authorization header), not the session: a task is
//     bound to its caller as every task request is (its sealed id holds a
//     hash of the caller).
//   - Newest first, taskListPage to a page; the cursor is the id of the
//     last task of the page before, so a task made while a client pages
//     does not shift the pages it has not read. A cursor that names no task
//     of the caller's (any more) is -32602, as the spec says.
//   - A record still "working" is polled at the engine before it is listed
//     (as tasks/get would be: at most taskListPage polls, taskListPolls at
//     once), so the list does not show a run that ended as still going; an
//     ended one is listed as recorded. A task tasks/get would not find (its
//     ttl passed, its tool is no longer served, the task key changed) is
//     not listed.

// taskListPage is how many tasks one tasks/list answer holds at most.
const taskListPage = 50

// taskListPolls bounds the engine polls one tasks/list runs at once.
const taskListPolls = 8

// list answers tasks/list.
func (d *taskDoor) list(r *http.Request, cursor string) (any, *jsonrpc.Error) {
	store := d.g.taskRecords
	if store == nil {
		return map[string]any{"tasks": []taskWire{}}, nil
	}
	who := d.g.callers.Digest(caller.FromRequest(r))
	recs, err := store.List(r.Context(), hex.EncodeToString(who[:]), 0)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks/list: the store of task records failed; try again"}
	}
	start := 0
	if cursor != "" {
		start = -1
		for i, rec := range recs {
			if rec.ID == cursor {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tasks/list: invalid cursor (it names no task of yours that is still kept)"}
		}
	}
	end := min(start+taskListPage, len(recs))
	page := recs[start:end]
	out := make([]*taskWire, len(page))
	var wg sync.WaitGroup
	sem := make(chan struct{}, taskListPolls)
	for i, rec := range page {
		c, t, rerr := d.open(r, rec.ID)
		if rerr != nil {
			continue
		}
		runner := d.g.runners[t.Upstream]
		if rec.Status != "working" {
			w := d.wire(rec.ID, c, runner, "", "")
			w.Status = rec.Status
			w.LastUpdatedAt = rec.Updated.UTC().Format(time.RFC3339Nano)
			out[i] = &w
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, rerr := d.status(r, c, t) // what tasks/get would answer, the id opened once
			if rerr == nil {
				w := d.wire(rec.ID, c, runner, st.state, st.msg)
				d.record(r, "tasks/get", w, nil)
				out[i] = &w
			}
		}()
	}
	wg.Wait()
	tasks := make([]taskWire, 0, len(out))
	for _, w := range out {
		if w != nil {
			tasks = append(tasks, *w)
		}
	}
	res := map[string]any{"tasks": tasks}
	if end < len(recs) {
		res["nextCursor"] = recs[end-1].ID
	}
	return res, nil
}
