package api

import (
	"net/http"
)

func (a *API) listWorkflows(w http.ResponseWriter, _ *http.Request) {
	a.locked(w, func() (int, any) { return http.StatusOK, a.workflows })
}

func (a *API) getWorkflow(w http.ResponseWriter, r *http.Request) {
	id := pathVar(r, "workflow_id")
	a.locked(w, func() (int, any) {
		for _, wf := range a.workflows {
			if wf.WorkflowID == id {
				return http.StatusOK, wf
			}
		}
		return failf(http.StatusNotFound, "workflow %q not found", id)
	})
}
