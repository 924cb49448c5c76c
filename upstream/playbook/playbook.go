// Package playbook runs workflow-engine playbooks as tool calls: it starts a
// run through the engine's execute route, polls its status route until the
// run is terminal or a ceiling is reached, and maps the terminal status to an
// MCP tool result. It is the one runner behind both of the gateway's front
// ends for playbooks (/mcp and the NoETL-compatible JSON-RPC endpoint).
//
// The wire shapes default to NoETL's: POST /api/execute {"path","workload"}
// → {"execution_id"}; GET /api/executions/{id}/status → {"completed": bool,
// "failed": bool, ...}; an optional cancel route. Terminal detection is
// configurable (see [Terminal]) for engines that report a status string.
//
// A run belongs to the [Runner], not to the request that started it: the
// request waits for it, and a request re-sent with the same caller, tool and
// arguments within the dedup window waits for the same run rather than
// starting a second one (clients re-send when their stream breaks). When
// every waiting request has gone — cancelled, or the client hung up — the run
// is cancelled upstream after a short linger, which leaves a re-send time to
// attach.
//
// Requests go through an [upstream.Client], so a run is sent exactly as a
// REST tool's call is: the caller's credentials, the upstream's concurrency
// slots, timeouts and response budget.
package playbook

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/upstream"
)

// Defaults for [Options].
const (
	// DefaultPollInterval is NoETL's own MCP endpoint's cadence.
	DefaultPollInterval = 1500 * time.Millisecond
	// DefaultTimeout is NoETL's ceiling.
	DefaultTimeout = 90 * time.Second
	// DefaultDedupWindow is how long a run stays attachable after it ends.
	DefaultDedupWindow = 30 * time.Second
	// DefaultLinger is how long a run nobody waits for any more goes on
	// before it is cancelled upstream: long enough for a client whose
	// stream broke to re-send, short enough that an abandoned run stops.
	DefaultLinger = 2 * time.Second
	// DefaultMaxResultText bounds a result's text.
	DefaultMaxResultText = 32 << 10
	// DefaultMaxStructured bounds a result's structuredContent (the whole
	// terminal status); a larger status is left out of it.
	DefaultMaxStructured = 256 << 10
	// DefaultMaxPollFailures is how many status polls in a row may fail
	// (no answer, 5xx) before the run is given up.
	DefaultMaxPollFailures = 3
	// DefaultMaxRuns bounds the runs one Runner (one engine) has in flight.
	DefaultMaxRuns = 256

	// MinPollInterval is the shortest PollInterval allowed: a poll is a
	// request to the engine and, with a progress token, a notification to
	// the client, so this also bounds those to 10 a second per run.
	MinPollInterval = 100 * time.Millisecond
	// MaxTimeout is the longest Timeout allowed: past a day a run is a job
	// for a scheduler, not a tool call someone waits for.
	MaxTimeout = 24 * time.Hour
)

// A Route is one of the engine's routes: a method and a path template below
// the upstream's base URL, where "{id}" stands for the execution id.
type Route struct {
	Method string
	Path   string
}

// IsZero reports whether r is unset.
func (r Route) IsZero() bool { return r.Method == "" && r.Path == "" }

func (r Route) String() string { return r.Method + " " + r.Path }

// ParseRoute parses "METHOD /path", e.g. "GET /api/executions/{id}/status".
func ParseRoute(s string) (Route, error) {
	method, path, ok := strings.Cut(strings.TrimSpace(s), " ")
	path = strings.TrimSpace(path)
	switch {
	case !ok || path == "":
		return Route{}, fmt.Errorf("route %q is not METHOD /path", s)
	case method != strings.ToUpper(method) || !validMethods[method]:
		return Route{}, fmt.Errorf("route %q: %q is not an upper-case HTTP method", s, method)
	case !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#"):
		return Route{}, fmt.Errorf("route %q: the path must start with / and hold no query", s)
	}
	return Route{Method: method, Path: path}, nil
}

var validMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true,
}

// Routes are the engine's routes. Execute and Status are required; Status
// and Cancel must hold "{id}".
type Routes struct {
	Execute Route
	Status  Route
	Cancel  Route // zero: the engine cannot cancel a run
}

// Validate checks that the routes can run a playbook: Execute and Status
// are set, each path parses as an [upstream.PathTemplate], Status and Cancel
// hold {id} and Execute no placeholder at all.
func (r Routes) Validate() error {
	_, err := r.templates()
	return err
}

// routeTemplates are the routes' paths, parsed.
type routeTemplates struct {
	execute, status, cancel *upstream.PathTemplate // cancel: nil without a route
}

func (r Routes) templates() (routeTemplates, error) {
	var t routeTemplates
	switch {
	case r.Execute.IsZero():
		return t, errors.New("the execute route is missing")
	case r.Status.IsZero():
		return t, errors.New("the status route is missing")
	}
	for _, c := range []struct {
		role string
		rt   Route
		to   **upstream.PathTemplate
		id   bool
	}{{"execute", r.Execute, &t.execute, false}, {"status", r.Status, &t.status, true}, {"cancel", r.Cancel, &t.cancel, true}} {
		if c.rt.IsZero() {
			continue
		}
		pt, err := upstream.ParsePathTemplate(c.rt.Path)
		if err != nil {
			return t, fmt.Errorf("%s route %s: %v", c.role, c.rt, err)
		}
		names := pt.Names()
		switch {
		case c.id && !slices.Contains(names, "id"):
			return t, fmt.Errorf("%s route %s has no {id}", c.role, c.rt)
		case !c.id && len(names) > 0:
			return t, fmt.Errorf("%s route %s: {%s} is not filled by anything (the execute route takes no placeholder)", c.role, c.rt, names[0])
		case len(names) > 1:
			return t, fmt.Errorf("%s route %s: only {id} is filled in, not {%s}", c.role, c.rt, slices.DeleteFunc(names, func(n string) bool { return n == "id" })[0])
		}
		*c.to = pt
	}
	return t, nil
}

// Terminal says how to read a status as terminal. The zero value is NoETL's:
// the booleans "completed" and "failed" (failed wins).
type Terminal struct {
	// Pointer is a JSON pointer (RFC 6901) to the run's state in the status
	// object, e.g. "/status". Empty: NoETL's booleans.
	Pointer string `yaml:"pointer" json:"pointer,omitempty"`
	// Succeeded are the state values of a run that finished well, e.g.
	// [COMPLETED, SUCCESS]; compared case-insensitively with the value's
	// text. Required with Pointer.
	Succeeded []string `yaml:"succeeded" json:"succeeded,omitempty"`
	// Failed are the state values of a run that failed or was cancelled,
	// e.g. [FAILED, ERROR, CANCELLED]. Required with Pointer.
	Failed []string `yaml:"failed" json:"failed,omitempty"`
}

// Validate checks the pointer's syntax and that it has value sets.
func (t Terminal) Validate() error {
	if t.Pointer == "" {
		if len(t.Succeeded)+len(t.Failed) > 0 {
			return errors.New("terminal: succeeded and failed need a pointer")
		}
		return nil
	}
	if !strings.HasPrefix(t.Pointer, "/") {
		return fmt.Errorf("terminal: pointer %q must start with / (RFC 6901)", t.Pointer)
	}
	if len(t.Succeeded) == 0 || len(t.Failed) == 0 {
		return fmt.Errorf("terminal: pointer %s needs both succeeded and failed values", t.Pointer)
	}
	return nil
}

// Options configures a [Runner]. Zero fields take the defaults above.
type Options struct {
	Routes Routes
	// PollInterval is the time between status polls. Default
	// DefaultPollInterval (1.5s); at least MinPollInterval (100ms). The
	// first poll comes right after the run starts, so a fast playbook
	// answers at once.
	PollInterval time.Duration
	// Timeout is the ceiling of one run, from its start: past it the run is
	// cancelled upstream (when there is a cancel route) and the result says
	// so. Default DefaultTimeout (90s); at most MaxTimeout (24h).
	Timeout time.Duration
	// MaxRuns bounds the runs in flight at once, task runs included; a
	// request that would start one more is refused (State Busy) with
	// nothing sent to the engine. Joining a run already going (the dedup
	// window) starts none. Default DefaultMaxRuns (256); negative: no bound.
	MaxRuns int
	// MaxRunsPerCaller bounds the runs in flight that one Request.Caller
	// started, the same way. Callers the gateway cannot tell apart
	// (Request.Caller "") share one count. Zero or negative: no bound.
	MaxRunsPerCaller int
	// Terminal says how a status is terminal. Default NoETL's booleans.
	Terminal Terminal
	// DedupWindow is how long after its end a succeeded run's outcome is
	// given to a re-sent request (same caller, tool and arguments); while it
	// runs, and until it is being cancelled, a re-send attaches to it. A run
	// that failed, timed out or was cancelled is never handed to a new
	// request, and requests of an anonymous caller (Request.Caller "") are
	// never merged. Default DefaultDedupWindow (30s); negative: every
	// request starts its own run.
	DedupWindow time.Duration
	// Linger is how long a run that nobody waits for goes on before it is
	// cancelled upstream. Default DefaultLinger (2s); negative: at once.
	Linger time.Duration
	// MaxResultText bounds the result's text. Default DefaultMaxResultText.
	MaxResultText int
	// MaxStructured bounds the structuredContent. Default
	// DefaultMaxStructured.
	MaxStructured int
	// MaxPollFailures is how many failed polls in a row give a run up.
	// Default DefaultMaxPollFailures.
	MaxPollFailures int
	// Shared, if set, is the state the runner shares with the other
	// replicas of a fleet (see Shared): the dedup table, who waits for a
	// run, and the run caps count every replica's runs. Nil: this process
	// alone (the default).
	Shared Shared
	// Logger receives a line per run's end. Nil: no logging. Never the
	// workload or credentials.
	Logger *slog.Logger
	// OnRunEnd, if set, is called once per run as it ends (task runs
	// included, Busy refusals not: they start no run), on the run's own
	// goroutine: for a duration metric. It must not block.
	OnRunEnd func(RunEnd)
}

// RunEnd is what Options.OnRunEnd is told of a run that ended.
type RunEnd struct {
	Tool    string // the Request.Tool that started it
	Path    string
	State   State
	Elapsed time.Duration // from its start to its outcome
}

// Runner runs playbooks against one engine. It is safe for concurrent use.
type Runner struct {
	client *upstream.Client
	opts   Options
	logger *slog.Logger

	paths routeTemplates

	mu        sync.Mutex
	runs      map[string]*run // by dedup key
	lastPrune time.Time
	active    int            // runs in flight (see Options.MaxRuns)
	byCaller  map[string]int // runs in flight by Request.Caller

	released    chan struct{} // closed by Release
	releaseOnce sync.Once
	waiting     atomic.Int64 // requests inside Run (see Waiting)

	prev atomic.Pointer[Runner] // the runner this one replaced (see Succeed)
}

// Active is the number of runs in flight: started, task runs included, and
// not yet ended. Safe for concurrent use.
func (r *Runner) Active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active
}

// Waiting is the number of requests waiting in Run for a run's outcome:
// the playbook calls in flight. (Requests that joined one run are each
// counted; a task's run has no request waiting.) Safe for concurrent use;
// it takes no lock.
func (r *Runner) Waiting() int { return int(r.waiting.Load()) }

// Check reports what New would refuse in o, so that a configuration can be
// checked before any client exists.
func (o *Options) Check() error {
	if err := o.Routes.Validate(); err != nil {
		return fmt.Errorf("playbook: %v", err)
	}
	if err := o.Terminal.Validate(); err != nil {
		return fmt.Errorf("playbook: %v", err)
	}
	switch {
	case o.PollInterval < 0 || o.Timeout < 0:
		return errors.New("playbook: poll_interval and timeout must not be negative")
	case o.PollInterval != 0 && o.PollInterval < MinPollInterval:
		return fmt.Errorf("playbook: poll_interval %s is below the floor of %s", o.PollInterval, MinPollInterval)
	case o.Timeout > MaxTimeout:
		return fmt.Errorf("playbook: timeout %s is above the ceiling of %s", o.Timeout, MaxTimeout)
	}
	return nil
}

// New returns a Runner that sends through c.
func New(c *upstream.Client, opts *Options) (*Runner, error) {
	r := &Runner{client: c, runs: map[string]*run{}, byCaller: map[string]int{}, released: make(chan struct{})}
	if opts != nil {
		r.opts = *opts
	}
	o := &r.opts
	if err := o.Check(); err != nil {
		return nil, err
	}
	r.paths, _ = o.Routes.templates() // Check parsed them
	if o.MaxRuns == 0 {
		o.MaxRuns = DefaultMaxRuns
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.MaxResultText <= 0 {
		o.MaxResultText = DefaultMaxResultText
	}
	if o.MaxStructured <= 0 {
		o.MaxStructured = DefaultMaxStructured
	}
	if o.MaxPollFailures <= 0 {
		o.MaxPollFailures = DefaultMaxPollFailures
	}
	r.logger = o.Logger
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Options returns the runner's options, defaults applied.
func (r *Runner) Options() Options { return r.opts }
