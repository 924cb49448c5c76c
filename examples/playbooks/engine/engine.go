// Package engine is a small playbook engine with NoETL's REST wire shapes:
// POST /api/execute {"path","workload"} → {"execution_id"}; GET
// /api/executions/{id}/status → {"completed","failed","progress","message",
// ...}; POST /api/executions/{id}/cancel; GET /api/catalog lists the
// playbooks. Its OpenAPI document (GET /openapi.json) marks those four
// operations with x-mcp-playbook: execute|status|cancel|catalog, so mcpgate
// can find the routes without configuration.
//
// It is mcpgate's built-in playbook demo (served in-process by cmd/mcpgate)
// and the real upstream of the playbook runner's tests. Runs keep no
// goroutine: a run's state is computed from its start time when asked, so a
// thousand waiting runs cost a thousand small records, and the package works
// inside a testing/synctest bubble.
package engine

import (
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// DefaultStep is how long each of demo/slow's steps takes.
const DefaultStep = time.Second

// Options configures an [Engine]. Nil options are the zero value.
type Options struct {
	// Token, if set, must be presented as "Authorization: Bearer <Token>"
	// on every /api/ request; others get 401. Empty (the default): none.
	Token string
	// Step is how long each step of demo/slow takes. Zero means
	// DefaultStep.
	Step time.Duration
	// NumericIDs makes execution ids JSON integers above 2^53, as engines
	// with 63-bit snowflake ids answer them: FirstNumericID, then the next
	// integers. Read through a float64 they all round to the same few
	// values, so a client that does polls and cancels another run, which
	// this engine answers 404. Default: 16 random hex digits, as strings.
	NumericIDs bool
}

// FirstNumericID is the first execution id of an engine with
// Options.NumericIDs. As a float64 it reads 619162855312457984.
const FirstNumericID = 619162855312458001

// Playbook is one playbook the engine runs.
type Playbook struct {
	Path        string         `json:"path"`
	Description string         `json:"description,omitempty"`
	Workload    map[string]any `json:"workload"`
	Metadata    Metadata       `json:"metadata"`
	// Secrets names the workload keys whose values are secret (the
	// catalog's form of a "# ui:secret" directive). None of the engine's
	// own playbooks uses it: their Content says it.
	Secrets []string `json:"secrets,omitempty"`
	// Content is the playbook's YAML source, as NoETL's catalog serves it:
	// its workload keys carry "# ui:secret", "# ui:enum=[a,b]" and
	// "# ui:description=…" directives.
	Content string `json:"content,omitempty"`

	steps int                                         // 0: done at once
	run   func(w map[string]any) (any, string, error) // result, summary, failure
}

// Metadata is NoETL's playbook metadata.
type Metadata struct {
	// ExposesAsMCP false hides the playbook from MCP clients.
	ExposesAsMCP bool `json:"exposes_as_mcp"`
}

// Playbooks are the engine's playbooks: demo/fast says hello at once,
// demo/slow counts steps with progress, demo/fail fails, internal/tool is
// hidden from MCP (exposes_as_mcp false).
func Playbooks() []Playbook {
	return []Playbook{
		{
			Path: "demo/fast", Description: "Says hello at once.",
			Workload: map[string]any{"name": "world"},
			Metadata: Metadata{ExposesAsMCP: true},
			Content: source("demo/fast", "Says hello at once.", `
  name: world  # ui:description=Whom to greet.`) + demoMCP,
			run: func(w map[string]any) (any, string, error) {
				msg := fmt.Sprintf("Hello, %v!", orDefault(w["name"], "world"))
				return map[string]any{"greeting": msg}, msg, nil
			},
		},
		{
			Path: "demo/slow", Description: "Counts five steps, reporting progress; takes a few seconds.",
			Workload: map[string]any{"label": "demo", "note": nil},
			Metadata: Metadata{ExposesAsMCP: true},
			Content: source("demo/slow", "Counts five steps.", `
  label: demo
  note:`),
			steps: 5,
			run: func(w map[string]any) (any, string, error) {
				return map[string]any{"steps": 5, "label": orDefault(w["label"], "demo")}, fmt.Sprintf("%v: counted 5 steps", orDefault(w["label"], "demo")), nil
			},
		},
		{
			Path: "demo/fail", Description: "Always fails, to show a failed run.",
			Workload: map[string]any{"reason": "the demo fails on purpose"},
			Metadata: Metadata{ExposesAsMCP: true},
			Content: source("demo/fail", "Always fails.", `
  reason: the demo fails on purpose`),
			run: func(w map[string]any) (any, string, error) {
				return nil, "", fmt.Errorf("step check failed: %v", orDefault(w["reason"], "no reason"))
			},
		},
		{
			Path: "internal/tool", Description: "Internal housekeeping; not for agents.",
			Workload: map[string]any{"api_key": "s3cr3t-default", "scope": ""},
			Metadata: Metadata{ExposesAsMCP: false},
			Content: source("internal/tool", "Internal housekeeping.", `
  api_key: s3cr3t-default  # ui:secret
  scope: ""                # ui:enum=[read, write] # ui:description=What the housekeeping may touch.`),
			run: func(map[string]any) (any, string, error) {
				return map[string]any{"ok": true}, "housekeeping done", nil
			},
		},
	}
}

// demoMCP is demo/fast's mcp: section (NoETL's MCP schema extension): a
// prompt a gateway serves, and a model, tool, resource and turn that run
// only inside an engine (this one runs none of them).
const demoMCP = `mcp:
  models:
    - name: small
      provider: openai
  tools:
    - name: lookup_name
      type: python
      spec: {code: "def main(name): return name.title()"}
  resources:
    - name: greetings_log
      type: postgres
      spec: {sql: "SELECT name, greeted_at FROM greetings"}
  prompts:
    - name: greet
      description: Write a greeting for someone, in a given tone.
      arguments: [{name: tone, description: "The greeting's tone", enum: [warm, formal]}]
      template: |
        Write a {{ input.tone }} greeting for {{ input.name }}.
  turns:
    - name: compose
      model: small
      user:
        - use: resource:greetings_log
        - text: Greet the next person.
      tools_allowed: [lookup_name]
`

// source is a playbook's YAML file in NoETL's shape, around its workload
// block (indented two spaces, as in a NoETL playbook).
func source(path, description, workload string) string {
	return fmt.Sprintf(`apiVersion: noetl.io/v1
kind: Playbook
metadata:
  name: %s
  path: %s
  description: %s
workload:%s
workflow:
  - step: start
    next:
      - step: end
  - step: end
`, path[strings.LastIndex(path, "/")+1:], path, description, workload)
}

func orDefault(v, d any) any {
	if v == nil || v == "" {
		return d
	}
	return v
}

// Engine runs playbooks, in memory. It is safe for concurrent use.
type Engine struct {
	opts      Options
	playbooks map[string]Playbook

	mu     sync.Mutex
	runs   map[string]*execution
	counts Counts
	nextID uint64 // Options.NumericIDs: the next id less FirstNumericID
}

// Counts says how many runs were started and cancelled, for tests.
type Counts struct {
	Started   int
	Cancelled int
}

type execution struct {
	id        string
	pb        *Playbook
	workload  map[string]any
	started   time.Time
	cancelled bool
}

// New returns an engine with the playbooks of [Playbooks].
func New(opts *Options) *Engine {
	e := &Engine{playbooks: map[string]Playbook{}, runs: map[string]*execution{}}
	if opts != nil {
		e.opts = *opts
	}
	if e.opts.Step <= 0 {
		e.opts.Step = DefaultStep
	}
	for _, p := range Playbooks() {
		e.playbooks[p.Path] = p
	}
	return e
}

// Counts returns how many runs were started and cancelled so far.
func (e *Engine) Counts() Counts {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts
}

// CancelledIDs returns the ids of the runs cancelled so far, in no order,
// for tests that check a run was cancelled under its own id.
func (e *Engine) CancelledIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for id, x := range e.runs {
		if x.cancelled {
			ids = append(ids, id)
		}
	}
	return ids
}

// Handler returns the engine's routes.
func (e *Engine) Handler() http.Handler {
	r := mux.NewRouter()
	r.HandleFunc("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	}).Methods(http.MethodGet)
	api := r.PathPrefix("/api").Subrouter()
	api.Use(e.auth)
	api.HandleFunc("/execute", e.execute).Methods(http.MethodPost)
	api.HandleFunc("/executions", e.list).Methods(http.MethodGet)
	api.HandleFunc("/executions/{id}/status", e.status).Methods(http.MethodGet)
	api.HandleFunc("/executions/{id}/cancel", e.cancel).Methods(http.MethodPost)
	api.HandleFunc("/catalog", e.catalog).Methods(http.MethodGet)
	return r
}

func (e *Engine) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.opts.Token != "" {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(e.opts.Token)) != 1 {
				writeJSON(w, http.StatusUnauthorized, map[string]any{"detail": "not authenticated"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (e *Engine) execute(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Path     string         `json:"path"`
		Workload map[string]any `json:"workload"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"detail": "body is not a JSON object with path and workload"})
		return
	}
	pb, ok := e.playbooks[body.Path]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": fmt.Sprintf("no playbook %q", body.Path)})
		return
	}
	workload := map[string]any{}
	for k, v := range pb.Workload {
		workload[k] = v
	}
	for k, v := range body.Workload {
		workload[k] = v
	}
	x := &execution{pb: &pb, workload: workload, started: time.Now()}
	e.mu.Lock()
	if e.opts.NumericIDs {
		x.id = strconv.FormatUint(FirstNumericID+e.nextID, 10)
		e.nextID++
	} else {
		var raw [8]byte
		rand.Read(raw[:])
		x.id = hex.EncodeToString(raw[:])
	}
	e.runs[x.id] = x
	e.counts.Started++
	e.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"execution_id": e.wireID(x.id), "status": "RUNNING"})
}

func (e *Engine) find(w http.ResponseWriter, r *http.Request) *execution {
	id := mux.Vars(r)["id"]
	e.mu.Lock()
	x := e.runs[id]
	e.mu.Unlock()
	if x == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": fmt.Sprintf("no execution %q", id)})
	}
	return x
}

func (e *Engine) status(w http.ResponseWriter, r *http.Request) {
	x := e.find(w, r)
	if x == nil {
		return
	}
	e.mu.Lock()
	cancelled := x.cancelled
	e.mu.Unlock()
	st := map[string]any{"execution_id": e.wireID(x.id), "path": x.pb.Path}
	if cancelled {
		st["status"], st["completed"], st["failed"] = "CANCELLED", true, true
		st["message"] = "the execution was cancelled"
		writeJSON(w, http.StatusOK, st)
		return
	}
	if n := x.pb.steps; n > 0 {
		done := int(time.Since(x.started) / e.opts.Step)
		if done < n {
			st["status"], st["completed"], st["failed"] = "RUNNING", false, false
			st["progress"] = float64(done) / float64(n)
			st["message"] = fmt.Sprintf("step %d of %d", done+1, n)
			writeJSON(w, http.StatusOK, st)
			return
		}
	}
	result, summary, err := x.pb.run(x.workload)
	if err != nil {
		st["status"], st["completed"], st["failed"] = "FAILED", true, true
		st["error"] = err.Error()
		writeJSON(w, http.StatusOK, st)
		return
	}
	st["status"], st["completed"], st["failed"] = "COMPLETED", true, false
	st["progress"] = 1.0
	st["summary"] = summary
	st["result"] = result
	writeJSON(w, http.StatusOK, st)
}

func (e *Engine) cancel(w http.ResponseWriter, r *http.Request) {
	x := e.find(w, r)
	if x == nil {
		return
	}
	e.mu.Lock()
	if !x.cancelled && !e.finished(x) {
		x.cancelled = true
		e.counts.Cancelled++
	}
	e.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"execution_id": e.wireID(x.id), "status": "CANCELLED"})
}

// wireID is an execution id as the engine writes it in JSON: a number with
// Options.NumericIDs, else a string.
func (e *Engine) wireID(id string) any {
	if e.opts.NumericIDs {
		return json.Number(id)
	}
	return id
}

// list answers the runs started so far, oldest first: {"executions":
// [{execution_id, path, workload, started, cancelled}]}. Not in the
// document: it is for tests and operators, not for the gateway.
func (e *Engine) list(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	xs := make([]*execution, 0, len(e.runs))
	for _, x := range e.runs {
		xs = append(xs, x)
	}
	slices.SortFunc(xs, func(a, b *execution) int { return a.started.Compare(b.started) })
	out := make([]map[string]any, 0, len(xs))
	for _, x := range xs {
		out = append(out, map[string]any{"execution_id": e.wireID(x.id), "path": x.pb.Path, "workload": x.workload,
			"started": x.started.UTC().Format(time.RFC3339Nano), "cancelled": x.cancelled})
	}
	e.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"executions": out})
}

// finished reports whether x ran its course (a finished run cannot be
// cancelled).
func (e *Engine) finished(x *execution) bool {
	return time.Since(x.started) >= time.Duration(x.pb.steps)*e.opts.Step
}

func (e *Engine) catalog(w http.ResponseWriter, _ *http.Request) {
	list := Playbooks()
	slices.SortFunc(list, func(a, b Playbook) int { return strings.Compare(a.Path, b.Path) })
	writeJSON(w, http.StatusOK, map[string]any{"playbooks": list})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
