// Package api is a small orchestrator-style REST API, in the shape of
// orchestrator-core's agent surface: workflows, processes (start, resume,
// abort), products and subscriptions, kept in memory.
//
// Its OpenAPI document ([OpenAPI]) tags operations the way orchestrator-core
// does — agent-exposed (the gate), agent-readonly, agent-destructive,
// agent-large — so mcpgate turns them into MCP tools; delete_process and
// health are left untagged to show the gate. list_workflows (tagged
// agent-resource) and get_workflow_by_id (x-mcp-resource) are MCP resources
// too: a resource and a resource template. The package is mcpgate's built-in
// demo (served in-process by cmd/mcpgate) and the real upstream of the
// end-to-end tests (served standalone by the parent command).
package api

import (
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/gorilla/mux"
)

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3.0 document (a copy: callers may keep or
// change it). Its server URL is relative ("/"), to be resolved against the URL
// the document was fetched from; the API itself serves it at GET /openapi.json.
func OpenAPI() []byte { return slices.Clone(openAPI) }

// Options configures an [API]. Nil options are the zero value.
type Options struct {
	// Token, if set, must be presented as "Authorization: Bearer <Token>" on
	// every /api/ request but the GET /api/health liveness probe; others get
	// 401 with a JSON detail. Empty (the default): no authentication.
	Token string
	// RecordRequests enables GET /_debug/requests, which lists the last 100
	// requests to /api/ — method, path, query, body and every header,
	// Authorization verbatim — and DELETE /_debug/requests, which clears
	// the list. It is a test-only aid: the end-to-end tests use it to check
	// which headers the gateway forwarded. Never enable it where real tokens
	// flow. Default false: the /_debug routes do not exist.
	RecordRequests bool
	// Logger receives one debug record per /api/ request (method and path
	// only, never headers). Nil: no logging.
	Logger *slog.Logger
}

// API is the orchestrator: an in-memory store and its HTTP routes. It is safe
// for concurrent use.
type API struct {
	opts     Options
	logger   *slog.Logger
	recorder recorder // used only if opts.RecordRequests

	mu            sync.Mutex // guards the store below
	workflows     []*Workflow
	processes     []*Process // oldest first
	products      []*Product
	subscriptions []*Subscription
}

// New returns an API seeded with a few workflows, products, subscriptions and
// processes. opts is copied; nil means the zero Options.
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

// Handler returns the API's HTTP handler. Every /api/ request, routed or not,
// is logged, recorded (if enabled) and authenticated before routing, so that a
// wrong path from the gateway still shows up in /_debug/requests.
func (a *API) Handler() http.Handler {
	return a.observe(a.authenticate(a.newMux()))
}

// newMux lists every route. /api/ routes are the documented operations; the
// others are not in the document.
func (a *API) newMux() *mux.Router {
	notFound := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, detail{"not found"})
	})
	methodNotAllowed := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, detail{"method not allowed"})
	})
	r := mux.NewRouter()
	// Match on the escaped path, so that a value with an encoded "/" or ".."
	// (say, an ID of "../../admin") stays one path segment: it is a missing
	// record, not a path to clean and redirect to.
	r.UseEncodedPath()
	r.NotFoundHandler, r.MethodNotAllowedHandler = notFound, methodNotAllowed

	r.HandleFunc("/openapi.json", serveOpenAPI).Methods(http.MethodGet)
	if a.opts.RecordRequests {
		r.HandleFunc("/_debug/requests", a.listRecorded).Methods(http.MethodGet)
		r.HandleFunc("/_debug/requests", a.clearRecorded).Methods(http.MethodDelete)
	}

	// Full paths, no PathPrefix subrouter: gorilla/mux v1.8.1 subroutes
	// inherit the prefix matcher, which clears a method mismatch found by an
	// earlier route, so a subrouter answers a wrong method with 404, not 405.
	r.HandleFunc("/api/health", a.health).Methods(http.MethodGet)

	r.HandleFunc("/api/workflows", a.listWorkflows).Methods(http.MethodGet)
	r.HandleFunc("/api/workflows/{workflow_id}", a.getWorkflow).Methods(http.MethodGet)
	// orchestrator-core starts a process with POST /api/processes/{workflow_key},
	// next to GET /api/processes/{process_id}. OpenAPI treats two templates
	// that differ only in parameter names as the same path, and kin-openapi's
	// Validate rejects the pair ("conflicting paths"), so the demo nests the
	// start under the workflow instead.
	r.HandleFunc("/api/workflows/{workflow_name}/processes", a.createProcess).Methods(http.MethodPost)

	r.HandleFunc("/api/processes", a.listProcesses).Methods(http.MethodGet)
	r.HandleFunc("/api/processes/search", a.searchProcesses).Methods(http.MethodPost)
	r.HandleFunc("/api/processes/{process_id}", a.getProcess).Methods(http.MethodGet)
	r.HandleFunc("/api/processes/{process_id}", a.deleteProcess).Methods(http.MethodDelete)
	r.HandleFunc("/api/processes/{process_id}/resume", a.resumeProcess).Methods(http.MethodPut)
	r.HandleFunc("/api/processes/{process_id}/abort", a.abortProcess).Methods(http.MethodPut)

	r.HandleFunc("/api/products", a.listProducts).Methods(http.MethodGet)
	r.HandleFunc("/api/products/{product_id}", a.getProduct).Methods(http.MethodGet)

	r.HandleFunc("/api/subscriptions", a.listSubscriptions).Methods(http.MethodGet)
	r.HandleFunc("/api/subscriptions/{subscription_id}", a.getSubscription).Methods(http.MethodGet)
	r.HandleFunc("/api/subscriptions/{subscription_id}/domain-model", a.getDomainModel).Methods(http.MethodGet)
	return r
}

// isAPI reports whether r is for the documented /api/ surface.
func isAPI(r *http.Request) bool {
	return r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/")
}

// authenticate enforces opts.Token on /api/ requests.
func (a *API) authenticate(next http.Handler) http.Handler {
	if a.opts.Token == "" {
		return next
	}
	want := []byte("Bearer " + a.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The liveness probe is open (security: [] in the document):
		// probes do not carry credentials.
		if isAPI(r) && r.URL.Path != "/api/health" &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="orchestrator"`)
			writeJSON(w, http.StatusUnauthorized, detail{"missing or invalid bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}

func (a *API) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// detail is the body of every error response, as FastAPI (and so
// orchestrator-core) writes it.
type detail struct {
	Detail string `json:"detail"`
}

func failf(status int, format string, args ...any) (int, any) {
	return status, detail{fmt.Sprintf(format, args...)}
}

// locked runs fn with the store locked and writes the status and value it
// returns (no body if the value is nil). The value is encoded under the lock,
// because it may point into the store, but written after it, so that a slow
// client cannot hold up the store.
func (a *API) locked(w http.ResponseWriter, fn func() (int, any)) {
	a.mu.Lock()
	status, v := fn()
	var body []byte
	var err error
	if v != nil {
		body, err = json.Marshal(v)
	}
	a.mu.Unlock()
	if err != nil {
		a.logger.Error("encode response", "err", err)
		writeJSON(w, http.StatusInternalServerError, detail{"cannot encode the response"})
		return
	}
	writeBody(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"detail":"cannot encode the response"}`)
	}
	writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	if body == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// pathVar returns the route variable name, unescaped (the router matches the
// escaped path).
func pathVar(r *http.Request, name string) string {
	v := mux.Vars(r)[name]
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}
