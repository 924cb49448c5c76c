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
	"strings"
	"sync"
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

// Validate checks that the routes can run a playbook.
func (r Routes) Validate() error {
	switch {
	case r.Execute.IsZero():
		return errors.New("the execute route is missing")
	case r.Status.IsZero():
		return errors.New("the status route is missing")
	case !strings.Contains(r.Status.Path, "{id}"):
		return fmt.Errorf("status route %s has no {id}", r.Status)
	case !r.Cancel.IsZero() && !strings.Contains(r.Cancel.Path, "{id}"):
		return fmt.Errorf("cancel route %s has no {id}", r.Cancel)
	}
	return nil
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
	// DefaultPollInterval (1.5s). The first poll comes right after the run
	// starts, so a fast playbook answers at once.
	PollInterval time.Duration
	// Timeout is the ceiling of one run, from its start: past it the run is
	// cancelled upstream (when there is a cancel route) and the result says
	// so. Default DefaultTimeout (90s).
	Timeout time.Duration
	// Terminal says how a status is terminal. Default NoETL's booleans.
	Terminal Terminal
	// DedupWindow is how long after its end a run's outcome is given to a
	// re-sent request (same caller, tool and arguments); while it runs, a
	// re-send always attaches. Default DefaultDedupWindow (30s); negative:
	// every request starts its own run.
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
	// Logger receives a line per run's end. Nil: no logging. Never the
	// workload or credentials.
	Logger *slog.Logger
}

// Runner runs playbooks against one engine. It is safe for concurrent use.
type Runner struct {
	client *upstream.Client
	opts   Options
	logger *slog.Logger

	mu        sync.Mutex
	runs      map[string]*run // by dedup key
	lastPrune time.Time
}

// Check reports what New would refuse in o, so that a configuration can be
// checked before any client exists.
func (o *Options) Check() error {
	if err := o.Routes.Validate(); err != nil {
		return fmt.Errorf("playbook: %v", err)
	}
	if err := o.Terminal.Validate(); err != nil {
		return fmt.Errorf("playbook: %v", err)
	}
	if o.PollInterval < 0 || o.Timeout < 0 {
		return errors.New("playbook: poll_interval and timeout must not be negative")
	}
	return nil
}

// New returns a Runner that sends through c.
func New(c *upstream.Client, opts *Options) (*Runner, error) {
	r := &Runner{client: c, runs: map[string]*run{}}
	if opts != nil {
		r.opts = *opts
	}
	o := &r.opts
	if err := o.Check(); err != nil {
		return nil, err
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
