// Package api is a small orchestrator-style REST API, in the shape of
// orchestrator-core's agent surface: workflows, processes (start, resume,
// abort), products and subscriptions, in an in-memory store. Its OpenAPI
// document tags operations the way orchestrator-core does (agent-exposed,
// agent-readonly, agent-destructive, agent-large), so mcpgate turns them into
// MCP tools. It is mcpgate's built-in demo (served in-process) and the real
// upstream of the end-to-end tests (served standalone by the parent command).
package api

import (
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3.0 document.
func OpenAPI() []byte { return slices.Clone(openAPI) }

// Options configures an [API]. Nil options mean the zero value.
type Options struct {
	// Token, if set, must be presented as "Authorization: Bearer <Token>" on
	// every /api/ request; others get 401. Empty: no authentication.
	Token string
	// RecordRequests enables GET/DELETE /_debug/requests, which lists the last
	// 100 requests to /api/ with all their headers — Authorization verbatim.
	// A test-only aid: the end-to-end tests use it to check which headers the
	// gateway forwarded. Never enable it where real tokens flow.
	RecordRequests bool
	// Logger receives one debug record per request. Nil: no logging.
	Logger *slog.Logger
}

// API is the orchestrator. It is safe for concurrent use.
type API struct {
	opts   Options
	logger *slog.Logger

	mu            sync.Mutex
	workflows     []*Workflow
	processes     []*Process // newest last
	products      []*Product
	subscriptions []*Subscription
	recorded      []RecordedRequest
}

// RecordedRequest is one request as /_debug/requests lists it.
type RecordedRequest struct {
	Method   string              `json:"method"`
	Path     string              `json:"path"`
	RawQuery string              `json:"raw_query"`
	Headers  map[string][]string `json:"headers"`
	Body     string              `json:"body"`
}

// Workflow is a kind of process that can be started.
type Workflow struct {
	WorkflowID  string    `json:"workflow_id"`
	Name        string    `json:"name"`
	Target      string    `json:"target"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
}

// Step is one step of a process.
type Step struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Process is one run of a workflow.
type Process struct {
	ProcessID      string         `json:"process_id"`
	WorkflowName   string         `json:"workflow_name"`
	Status         string         `json:"status"`
	CustomerID     string         `json:"customer_id"`
	ProductID      string         `json:"product_id,omitempty"`
	Note           string         `json:"note,omitempty"`
	UserInput      map[string]any `json:"user_input,omitempty"`
	Steps          []Step         `json:"steps"`
	StartedAt      time.Time      `json:"started_at"`
	LastModifiedAt time.Time      `json:"last_modified_at"`
}

// Product is something a customer can subscribe to.
type Product struct {
	ProductID   string `json:"product_id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	ProductType string `json:"product_type"`
	Tag         string `json:"tag,omitempty"`
	Status      string `json:"status"`
}

// Subscription is a customer's instance of a product.
type Subscription struct {
	SubscriptionID string    `json:"subscription_id"`
	CustomerID     string    `json:"customer_id"`
	ProductID      string    `json:"product_id"`
	Status         string    `json:"status"`
	Description    string    `json:"description"`
	StartDate      time.Time `json:"start_date"`
	Insync         bool      `json:"insync"`
}

// New returns an API seeded with a few workflows, products, subscriptions and
// processes.
func New(opts *Options) *API {
	a := &API{}
	if opts != nil {
		a.opts = *opts
	}
	a.logger = a.opts.Logger
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	a.seed()
	return a
}

func (a *API) seed() {
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	a.workflows = []*Workflow{
		{"7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d01", "create_node", "CREATE", "Create a network node subscription", t0},
		{"7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d02", "modify_node", "MODIFY", "Change a node's settings", t0},
		{"7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d03", "terminate_node", "TERMINATE", "Terminate a node subscription", t0},
	}
	a.products = []*Product{
		{"4b2f0c9e-0000-4000-8000-000000000001", "Node Cisco", "A Cisco router as a managed node", "Node", "NODE", "active"},
		{"4b2f0c9e-0000-4000-8000-000000000002", "Node Nokia", "A Nokia router as a managed node", "Node", "NODE", "active"},
		{"4b2f0c9e-0000-4000-8000-000000000003", "Port 10G", "A 10 Gb/s service port", "Port", "PORT", "phase out"},
	}
	a.subscriptions = []*Subscription{
		{"9e8d7c6b-0000-4000-8000-000000000001", "c-1", a.products[0].ProductID, "active", "Node ams-core-01", t0.AddDate(0, 1, 0), true},
		{"9e8d7c6b-0000-4000-8000-000000000002", "c-1", a.products[2].ProductID, "active", "Port ams-core-01 1/1/1", t0.AddDate(0, 2, 0), true},
		{"9e8d7c6b-0000-4000-8000-000000000003", "c-2", a.products[1].ProductID, "initial", "Node rtm-edge-02", t0.AddDate(0, 3, 0), false},
		{"9e8d7c6b-0000-4000-8000-000000000004", "c-3", a.products[0].ProductID, "terminated", "Node utr-old-01", t0, true},
	}
	a.processes = []*Process{
		{ProcessID: "5a4b3c2d-0000-4000-8000-000000000001", WorkflowName: "create_node", Status: "completed", CustomerID: "c-1",
			ProductID: a.products[0].ProductID, Steps: []Step{{"Start", "success"}, {"Provision", "success"}, {"Done", "complete"}},
			StartedAt: t0.AddDate(0, 1, 0), LastModifiedAt: t0.AddDate(0, 1, 0)},
		{ProcessID: "5a4b3c2d-0000-4000-8000-000000000002", WorkflowName: "modify_node", Status: "running", CustomerID: "c-2",
			Steps: []Step{{"Start", "success"}, {"Apply config", "running"}}, StartedAt: t0.AddDate(0, 3, 0), LastModifiedAt: t0.AddDate(0, 3, 0)},
	}
}

// Handler returns the API's routes.
func (a *API) Handler() http.Handler { return a.newMux() }

func (a *API) newMux() *mux.Router {
	r := mux.NewRouter()
	r.HandleFunc("/openapi.json", serveOpenAPI).Methods(http.MethodGet)
	if a.opts.RecordRequests {
		r.HandleFunc("/_debug/requests", a.listRecorded).Methods(http.MethodGet)
		r.HandleFunc("/_debug/requests", a.clearRecorded).Methods(http.MethodDelete)
	}
	api := r.PathPrefix("/api").Subrouter()
	api.Use(a.record, a.authenticate)
	api.HandleFunc("/health", a.health).Methods(http.MethodGet)
	api.HandleFunc("/workflows", a.listWorkflows).Methods(http.MethodGet)
	api.HandleFunc("/workflows/{workflow_id}", a.getWorkflow).Methods(http.MethodGet)
	api.HandleFunc("/processes", a.listProcesses).Methods(http.MethodGet)
	api.HandleFunc("/processes/search", a.searchProcesses).Methods(http.MethodPost)
	// orchestrator-core spells this POST /api/processes/{workflow_key};
	// kin-openapi flags that template as conflicting with
	// /api/processes/{process_id}, so the demo nests it under the workflow.
	api.HandleFunc("/workflows/{workflow_name}/processes", a.createProcess).Methods(http.MethodPost)
	api.HandleFunc("/processes/{process_id}", a.getProcess).Methods(http.MethodGet)
	api.HandleFunc("/processes/{process_id}", a.deleteProcess).Methods(http.MethodDelete)
	api.HandleFunc("/processes/{process_id}/resume", a.resumeProcess).Methods(http.MethodPut)
	api.HandleFunc("/processes/{process_id}/abort", a.abortProcess).Methods(http.MethodPut)
	api.HandleFunc("/products", a.listProducts).Methods(http.MethodGet)
	api.HandleFunc("/products/{product_id}", a.getProduct).Methods(http.MethodGet)
	api.HandleFunc("/subscriptions", a.listSubscriptions).Methods(http.MethodGet)
	api.HandleFunc("/subscriptions/{subscription_id}", a.getSubscription).Methods(http.MethodGet)
	api.HandleFunc("/subscriptions/{subscription_id}/domain-model", a.getDomainModel).Methods(http.MethodGet)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeDetail(w, http.StatusNotFound, "not found") })
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeDetail(w, http.StatusMethodNotAllowed, "method not allowed")
	})
	return r
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}

// record keeps the request for /_debug/requests, when enabled.
func (a *API) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.opts.RecordRequests {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			a.mu.Lock()
			a.recorded = append(a.recorded, RecordedRequest{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(body)})
			if len(a.recorded) > 100 {
				a.recorded = a.recorded[len(a.recorded)-100:]
			}
			a.mu.Unlock()
		}
		a.logger.Debug("request", "method", r.Method, "path", r.URL.Path)
		next.ServeHTTP(w, r)
	})
}

func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+a.opts.Token {
			w.Header().Set("WWW-Authenticate", `Bearer realm="orchestrator"`)
			writeDetail(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *API) listRecorded(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	writeJSON(w, http.StatusOK, append([]RecordedRequest{}, a.recorded...))
}

func (a *API) clearRecorded(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	a.recorded = nil
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *API) listWorkflows(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	writeJSON(w, http.StatusOK, a.workflows)
}

func (a *API) getWorkflow(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := mux.Vars(r)["workflow_id"]
	for _, wf := range a.workflows {
		if wf.WorkflowID == id {
			writeJSON(w, http.StatusOK, wf)
			return
		}
	}
	writeDetail(w, http.StatusNotFound, fmt.Sprintf("workflow %q not found", id))
}

var processStatuses = []string{"running", "suspended", "completed", "aborted", "failed"}

func (a *API) listProcesses(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(processStatuses, status) {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("status %q is not one of %s", status, strings.Join(processStatuses, ", ")))
		return
	}
	limit, offset, ok := page(w, r)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*Process
	for i := len(a.processes) - 1; i >= 0; i-- {
		if p := a.processes[i]; status == "" || p.Status == status {
			out = append(out, p)
		}
	}
	writeJSON(w, http.StatusOK, paginate(out, limit, offset))
}

func (a *API) searchProcesses(w http.ResponseWriter, r *http.Request) {
	var f struct {
		WorkflowName string `json:"workflow_name"`
		Status       string `json:"status"`
		CustomerID   string `json:"customer_id"`
	}
	if !decode(w, r, &f, true) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []*Process{}
	for i := len(a.processes) - 1; i >= 0; i-- {
		p := a.processes[i]
		if (f.WorkflowName == "" || p.WorkflowName == f.WorkflowName) && (f.Status == "" || p.Status == f.Status) &&
			(f.CustomerID == "" || p.CustomerID == f.CustomerID) {
			out = append(out, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) createProcess(w http.ResponseWriter, r *http.Request) {
	var in struct {
		CustomerID string `json:"customer_id"`
		ProductID  string `json:"product_id"`
		Note       string `json:"note"`
	}
	if !decode(w, r, &in, true) {
		return
	}
	if in.CustomerID == "" {
		writeDetail(w, http.StatusBadRequest, "customer_id is required")
		return
	}
	name := mux.Vars(r)["workflow_name"]
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.ContainsFunc(a.workflows, func(wf *Workflow) bool { return wf.Name == name }) {
		writeDetail(w, http.StatusNotFound, fmt.Sprintf("workflow %q not found", name))
		return
	}
	now := time.Now().UTC().Truncate(time.Second)
	p := &Process{
		ProcessID: newID(), WorkflowName: name, Status: "suspended", CustomerID: in.CustomerID,
		ProductID: in.ProductID, Note: in.Note,
		Steps:     []Step{{"Start", "success"}, {"Input form", "suspend"}},
		StartedAt: now, LastModifiedAt: now,
	}
	a.processes = append(a.processes, p)
	writeJSON(w, http.StatusCreated, p)
}

// findProcess returns the process of the request's {process_id}; a.mu must be
// held.
func (a *API) findProcess(w http.ResponseWriter, r *http.Request) (int, *Process) {
	id := mux.Vars(r)["process_id"]
	for i, p := range a.processes {
		if p.ProcessID == id {
			return i, p
		}
	}
	writeDetail(w, http.StatusNotFound, fmt.Sprintf("process %q not found", id))
	return -1, nil
}

func (a *API) getProcess(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, p := a.findProcess(w, r); p != nil {
		writeJSON(w, http.StatusOK, p)
	}
}

func (a *API) deleteProcess(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, p := a.findProcess(w, r); p != nil {
		a.processes = slices.Delete(a.processes, i, i+1)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (a *API) resumeProcess(w http.ResponseWriter, r *http.Request) {
	var in struct {
		UserInput map[string]any `json:"user_input"`
	}
	if !decode(w, r, &in, false) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, p := a.findProcess(w, r)
	if p == nil {
		return
	}
	if p.Status != "suspended" {
		writeDetail(w, http.StatusConflict, fmt.Sprintf("process is %s, not suspended", p.Status))
		return
	}
	p.Status, p.UserInput = "running", in.UserInput
	p.Steps[len(p.Steps)-1].Status = "success"
	p.Steps = append(p.Steps, Step{"Provision", "running"})
	p.LastModifiedAt = time.Now().UTC().Truncate(time.Second)
	writeJSON(w, http.StatusOK, p)
}

func (a *API) abortProcess(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, p := a.findProcess(w, r)
	if p == nil {
		return
	}
	if p.Status != "running" && p.Status != "suspended" {
		writeDetail(w, http.StatusConflict, fmt.Sprintf("process is %s: only running or suspended processes can be aborted", p.Status))
		return
	}
	p.Status = "aborted"
	p.Steps = append(p.Steps, Step{"Abort", "aborted"})
	p.LastModifiedAt = time.Now().UTC().Truncate(time.Second)
	writeJSON(w, http.StatusOK, p)
}

func (a *API) listProducts(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	writeJSON(w, http.StatusOK, a.products)
}

func (a *API) getProduct(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := mux.Vars(r)["product_id"]
	if p := a.product(id); p != nil {
		writeJSON(w, http.StatusOK, p)
		return
	}
	writeDetail(w, http.StatusNotFound, fmt.Sprintf("product %q not found", id))
}

func (a *API) product(id string) *Product {
	for _, p := range a.products {
		if p.ProductID == id {
			return p
		}
	}
	return nil
}

func (a *API) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	customer, status := q.Get("customer_id"), q.Get("status")
	if status != "" && !slices.Contains([]string{"initial", "active", "terminated"}, status) {
		writeDetail(w, http.StatusBadRequest, fmt.Sprintf("status %q is not one of initial, active, terminated", status))
		return
	}
	limit, offset, ok := page(w, r)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*Subscription
	for _, s := range a.subscriptions {
		if (customer == "" || s.CustomerID == customer) && (status == "" || s.Status == status) {
			out = append(out, s)
		}
	}
	writeJSON(w, http.StatusOK, paginate(out, limit, offset))
}

func (a *API) subscription(w http.ResponseWriter, r *http.Request) *Subscription {
	id := mux.Vars(r)["subscription_id"]
	for _, s := range a.subscriptions {
		if s.SubscriptionID == id {
			return s
		}
	}
	writeDetail(w, http.StatusNotFound, fmt.Sprintf("subscription %q not found", id))
	return nil
}

func (a *API) getSubscription(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.subscription(w, r); s != nil {
		writeJSON(w, http.StatusOK, s)
	}
}

func (a *API) getDomainModel(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.subscription(w, r)
	if s == nil {
		return
	}
	p := a.product(s.ProductID)
	writeJSON(w, http.StatusOK, map[string]any{
		"subscription": s,
		"product":      p,
		"blocks": []map[string]any{
			{"name": p.Tag + "Block", "resources": map[string]string{"description": s.Description, "status": s.Status}},
			{"name": "IPAddressBlock", "resources": map[string]string{"ipv4": "192.0.2.10/32", "ipv6": "2001:db8::10/128"}},
		},
	})
}

// page reads limit (1..100, default 20) and offset (≥0, default 0).
func page(w http.ResponseWriter, r *http.Request) (limit, offset int, ok bool) {
	limit, offset = 20, 0
	q := r.URL.Query()
	for _, f := range []struct {
		name     string
		dst      *int
		min, max int
	}{{"limit", &limit, 1, 100}, {"offset", &offset, 0, 1 << 30}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < f.min || n > f.max {
				writeDetail(w, http.StatusBadRequest, fmt.Sprintf("%s must be an integer from %d to %d", f.name, f.min, f.max))
				return 0, 0, false
			}
			*f.dst = n
		}
	}
	return limit, offset, true
}

func paginate[T any](items []T, limit, offset int) []T {
	if offset >= len(items) {
		return []T{}
	}
	return items[offset:min(len(items), offset+limit)]
}

// decode reads a JSON body into v. An empty body is accepted unless required.
func decode(w http.ResponseWriter, r *http.Request, v any, required bool) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeDetail(w, http.StatusBadRequest, "cannot read body")
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if required {
			writeDetail(w, http.StatusBadRequest, "a JSON body is required")
			return false
		}
		return true
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeDetail(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}

// newID returns a random UUID (version 4).
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
