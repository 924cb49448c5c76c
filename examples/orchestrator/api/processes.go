package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// maxNote is the longest note a process keeps (maxLength in the document).
const maxNote = 500

func (a *API) listProcesses(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	if status != "" && !slices.Contains(processStatuses, status) {
		writeJSON(w, http.StatusBadRequest, detail{fmt.Sprintf("status %q is not one of %s", status, strings.Join(processStatuses, ", "))})
		return
	}
	limit, offset, err := page(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, detail{err.Error()})
		return
	}
	a.locked(w, func() (int, any) {
		return http.StatusOK, paginate(a.findProcesses("", status, ""), limit, offset)
	})
}

func (a *API) searchProcesses(w http.ResponseWriter, r *http.Request) {
	var f struct {
		WorkflowName string `json:"workflow_name"`
		Status       string `json:"status"`
		CustomerID   string `json:"customer_id"`
	}
	if err := decode(r, &f, false); err != nil {
		writeJSON(w, http.StatusBadRequest, detail{err.Error()})
		return
	}
	if f.Status != "" && !slices.Contains(processStatuses, f.Status) {
		writeJSON(w, http.StatusBadRequest, detail{fmt.Sprintf("status %q is not one of %s", f.Status, strings.Join(processStatuses, ", "))})
		return
	}
	a.locked(w, func() (int, any) {
		return http.StatusOK, a.findProcesses(f.WorkflowName, f.Status, f.CustomerID)
	})
}

// findProcesses returns the processes that match every non-empty filter,
// newest first. a.mu must be held.
func (a *API) findProcesses(workflow, status, customer string) []*Process {
	out := []*Process{}
	for _, p := range slices.Backward(a.processes) {
		if (workflow == "" || p.WorkflowName == workflow) && (status == "" || p.Status == status) &&
			(customer == "" || p.CustomerID == customer) {
			out = append(out, p)
		}
	}
	return out
}

func (a *API) createProcess(w http.ResponseWriter, r *http.Request) {
	var in struct {
		CustomerID string `json:"customer_id"`
		ProductID  string `json:"product_id"`
		Note       string `json:"note"`
	}
	if err := decode(r, &in, true); err != nil {
		writeJSON(w, http.StatusBadRequest, detail{err.Error()})
		return
	}
	switch {
	case in.CustomerID == "":
		writeJSON(w, http.StatusBadRequest, detail{"customer_id is required"})
		return
	case utf8.RuneCountInString(in.Note) > maxNote:
		writeJSON(w, http.StatusBadRequest, detail{fmt.Sprintf("note is over %d characters", maxNote)})
		return
	}
	name := pathVar(r, "workflow_name")
	a.locked(w, func() (int, any) {
		if !slices.ContainsFunc(a.workflows, func(wf *Workflow) bool { return wf.Name == name }) {
			return failf(http.StatusNotFound, "workflow %q not found", name)
		}
		if in.ProductID != "" && a.product(in.ProductID) == nil {
			return failf(http.StatusBadRequest, "product_id %q: no such product", in.ProductID)
		}
		now := time.Now().UTC().Truncate(time.Second)
		p := &Process{
			ProcessID: newID(), WorkflowName: name, Status: statusSuspended,
			CustomerID: in.CustomerID, ProductID: in.ProductID, Note: in.Note,
			Steps:     []Step{{"Start", "success"}, {"Input form", "suspend"}},
			StartedAt: now, LastModifiedAt: now,
		}
		a.processes = append(a.processes, p)
		w.Header().Set("Location", "/api/processes/"+p.ProcessID)
		return http.StatusCreated, ProcessCreated{ID: p.ProcessID, Process: p}
	})
}

// process returns the index and the process with the given id, or -1 and
// nil. a.mu must be held.
func (a *API) process(id string) (int, *Process) {
	for i, p := range a.processes {
		if p.ProcessID == id {
			return i, p
		}
	}
	return -1, nil
}

func (a *API) getProcess(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "process_id")
	a.locked(w, func() (int, any) {
		if _, p := a.process(id); p != nil {
			return http.StatusOK, p
		}
		return failf(http.StatusNotFound, "process %q not found", id)
	})
}

func (a *API) deleteProcess(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "process_id")
	a.locked(w, func() (int, any) {
		i, p := a.process(id)
		if p == nil {
			return failf(http.StatusNotFound, "process %q not found", id)
		}
		a.processes = slices.Delete(a.processes, i, i+1)
		return http.StatusNoContent, nil
	})
}

func (a *API) resumeProcess(w http.ResponseWriter, r *http.Request) {
	var in struct {
		UserInput map[string]any `json:"user_input"`
	}
	if err := decode(r, &in, false); err != nil {
		writeJSON(w, http.StatusBadRequest, detail{err.Error()})
		return
	}
	id := pathVar(r, "process_id")
	a.locked(w, func() (int, any) {
		_, p := a.process(id)
		switch {
		case p == nil:
			return failf(http.StatusNotFound, "process %q not found", id)
		case p.Status != statusSuspended:
			return failf(http.StatusConflict, "process %s is %s: only a suspended process can be resumed", id, p.Status)
		}
		p.Status, p.UserInput = statusRunning, in.UserInput
		p.Steps[len(p.Steps)-1].Status = "success"
		p.Steps = append(p.Steps, Step{"Provision", "running"})
		p.LastModifiedAt = time.Now().UTC().Truncate(time.Second)
		return http.StatusOK, p
	})
}

func (a *API) abortProcess(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "process_id")
	a.locked(w, func() (int, any) {
		_, p := a.process(id)
		switch {
		case p == nil:
			return failf(http.StatusNotFound, "process %q not found", id)
		case p.Status != statusRunning && p.Status != statusSuspended:
			return failf(http.StatusConflict, "process %s is %s: only a running or suspended process can be aborted", id, p.Status)
		}
		p.Status = statusAborted
		p.Steps = append(p.Steps, Step{"Abort", "aborted"})
		p.LastModifiedAt = time.Now().UTC().Truncate(time.Second)
		return http.StatusOK, p
	})
}
