package gateway

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// callBuckets are the bounds of mcpgate_tool_call_duration_seconds: from 1 ms
// (an in-process upstream, a cached answer) to 30 s (DefaultTimeout), about
// 2.5× apart, so a p99 read off them is within one step. Calls over 30 s land
// in +Inf, which is where a raised timeout's stragglers belong.
var callBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// runBuckets are the bounds of mcpgate_playbook_run_duration_seconds: from
// 100 ms (MinPollInterval: a run that ended on its first poll) to an hour,
// past playbook.DefaultTimeout (90 s) and a few steps apart; runs given a
// longer timeout (up to playbook.MaxTimeout, a day) land in +Inf.
var runBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 90, 180, 300, 600, 1800, 3600}

// maxScrapesInFlight bounds concurrent scrapes of the metrics endpoint; more
// are answered 503. A scrape walks every series, and the endpoint has no
// authentication, so it must not be a way to load the gateway.
const maxScrapesInFlight = 4

// metrics are the gateway's Prometheus collectors, on a registry of its own
// (never the global default: two gateways in one process, or a service that
// embeds one, must not collide). A nil *metrics records nothing, which is what
// metrics: {enabled: false} gives; every method is nil-safe, so call sites
// need no check and pay nothing when metrics are off.
//
// Labels hold only bounded values: tool names come from the catalog, upstream
// names from the configuration, outcomes from upstream.Outcome, status codes
// from HTTP's registry. Never arguments, tokens, session ids or request ids.
//
// Safe for concurrent use.
type metrics struct {
	registry *prometheus.Registry

	calls     *prometheus.CounterVec   // tool, upstream, outcome
	duration  *prometheus.HistogramVec // tool, upstream
	responses *prometheus.CounterVec   // upstream, code
	requests  *prometheus.CounterVec   // method (HTTP)
	rpc       *prometheus.CounterVec   // method (JSON-RPC)
	refused   *prometheus.CounterVec   // reason
	playbooks *prometheus.CounterVec   // playbook, outcome
	runTimes  *prometheus.HistogramVec // playbook, outcome: each run's duration

	// Kept children of calls, duration and responses (see observeCall).
	callCounters, durations, statusCounters sync.Map
	// Kept children of requests and rpc, by label.
	requestCounters, rpcCounters sync.Map
}

// counter returns vec's child for one label value, looked up in vec once and
// kept in kept: WithLabelValues hashes its labels on every call. Only for
// label values from a bounded set.
func counter(kept *sync.Map, vec *prometheus.CounterVec, label string) prometheus.Counter {
	c, ok := kept.Load(label)
	if !ok {
		c, _ = kept.LoadOrStore(label, vec.WithLabelValues(label))
	}
	return c.(prometheus.Counter)
}

// newMetrics registers the gateway's collectors, with the Go runtime's and
// the process's (go_goroutines, process_resident_memory_bytes, ...), on a new
// registry. clients are the upstreams' clients by name, and runners their
// playbook runners, for the in-flight gauges; federated, the MCP
// upstreams', for mcpgate_upstream_up.
func newMetrics(clients map[string]*upstream.Client, runners map[string]*playbook.Runner, federated map[string]*federation.Upstream) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_tool_calls_total",
			Help: "Tool calls, by tool, upstream and outcome (ok, invalid_arguments, http_error, bad_answer, busy, timeout, cancelled, unreachable).",
		}, []string{"tool", "upstream", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgate_tool_call_duration_seconds",
			Help:    "Time from sending a tool call's upstream request to reading its answer, for calls that sent one.",
			Buckets: callBuckets,
		}, []string{"tool", "upstream"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_upstream_responses_total",
			Help: "Upstream answers to tool calls, by upstream and HTTP status code (registered codes as is, others as their class, e.g. 5xx).",
		}, []string{"upstream", "code"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_http_requests_total",
			Help: "HTTP requests to the MCP endpoint, by HTTP method (GET, POST, DELETE, other).",
		}, []string{"method"}),
		rpc: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_rpc_requests_total",
			Help: "JSON-RPC messages received, by MCP method (unknown methods as other).",
		}, []string{"method"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_http_refused_total",
			Help: "HTTP requests to the MCP endpoint the front door refused, by reason (body_too_large, body_timeout, body_unreadable, parse_error, batch, not_object, session_cap).",
		}, []string{"reason"}),
		playbooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_playbook_runs_total",
			Help: "Playbook runs, by playbook and outcome (succeeded, failed, timeout, cancelled, not_started).",
		}, []string{"playbook", "outcome"}),
		runTimes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgate_playbook_run_duration_seconds",
			Help:    "Time from a playbook run's start to its outcome, once per run (a re-sent call that joined it, or a task, adds none), by playbook and outcome (succeeded, failed, timeout, cancelled, not_started).",
			Buckets: runBuckets,
		}, []string{"playbook", "outcome"}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcpgate_build_info",
			Help:        "Always 1; the version label is the gateway's.",
			ConstLabels: prometheus.Labels{"version": Version},
		}, func() float64 { return 1 }),
		m.calls, m.duration, m.responses, m.requests, m.rpc, m.refused, m.playbooks, m.runTimes,
	)
	// In flight is read from each client's own slot count when scraped, not
	// counted per call: it costs a REST call nothing, and it counts every
	// call path (go-sdk's, the front door's, stdio's) because they all go
	// through upstream.Client.Call. A playbook call holds a slot only while
	// one of its run's requests to the engine is out (a few ms of each 1.5 s
	// poll interval), which is why 1000 waiting playbook calls read 0
	// (issue 24): they are counted where they wait, in the runner
	// (Runner.Waiting), and the engine requests' slots (SendsInFlight) are
	// taken out so that nothing counts twice.
	for name, c := range clients {
		r := runners[name]
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcpgate_tool_calls_in_flight",
			Help:        "Tool calls in flight: REST calls holding one of the upstream's max_concurrent slots (sent, or about to be, and not yet answered), and playbook calls waiting for their run's outcome.",
			ConstLabels: prometheus.Labels{"upstream": name},
		}, func() float64 { return float64(callsInFlight(c, r)) }))
		if r != nil {
			m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "mcpgate_playbook_runs_in_flight",
				Help:        "Playbook runs started on the upstream's engine and not yet ended, task runs included (bounded by playbooks.max_runs).",
				ConstLabels: prometheus.Labels{"upstream": name},
			}, func() float64 { return float64(r.Active()) }))
		}
	}
	for name, up := range federated {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mcpgate_upstream_up",
			Help:        "1 while the upstream MCP server answers its health pings (3 failed in a row: 0, and its calls fail fast until one succeeds).",
			ConstLabels: prometheus.Labels{"upstream": name},
		}, func() float64 {
			if up.Status().Up {
				return 1
			}
			return 0
		}))
	}
	return m
}

// handler serves the registry in the Prometheus text (or, when asked,
// OpenMetrics) format, gzipped when the scraper accepts it.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		Registry:            m.registry, // promhttp_metric_handler_errors_total
		MaxRequestsInFlight: maxScrapesInFlight,
		Timeout:             10 * time.Second,
	})
}

// observeCall counts one finished tool call. [Gateway.logCall] calls it, so
// every call path that logs its call is counted. The duration is the
// Report's: from sending the upstream request to reading the answer; a call
// refused before anything was sent (Elapsed zero: invalid arguments, busy,
// cancelled while queued) is counted but not timed, so that it does not
// crowd the histogram's first bucket with calls that never left.
func (m *metrics) observeCall(tool, upstreamName string, rep upstream.Report) {
	if m == nil {
		return
	}
	// The children of each vector are looked up once per label set and kept
	// (label sets are bounded by the catalog, outcomes and HTTP codes):
	// WithLabelValues hashes its labels on every call, a third of what the
	// metrics cost a fast-path call (BenchmarkToolCallMetrics).
	key := callKey{tool, upstreamName, rep.Outcome}
	c, ok := m.callCounters.Load(key)
	if !ok {
		c, _ = m.callCounters.LoadOrStore(key, m.calls.WithLabelValues(tool, upstreamName, string(rep.Outcome)))
	}
	c.(prometheus.Counter).Inc()
	if rep.Elapsed > 0 {
		dk := callKey{tool: tool, upstream: upstreamName}
		h, ok := m.durations.Load(dk)
		if !ok {
			h, _ = m.durations.LoadOrStore(dk, m.duration.WithLabelValues(tool, upstreamName))
		}
		h.(prometheus.Observer).Observe(rep.Elapsed.Seconds())
	}
	if rep.Status != 0 {
		rk := statusKey{upstreamName, rep.Status}
		r, ok := m.statusCounters.Load(rk)
		if !ok {
			r, _ = m.statusCounters.LoadOrStore(rk, m.responses.WithLabelValues(upstreamName, statusLabel(rep.Status)))
		}
		r.(prometheus.Counter).Inc()
	}
}

// callKey and statusKey name the kept children of the per-call vectors.
type callKey struct {
	tool, upstream string
	outcome        upstream.Outcome
}

type statusKey struct {
	upstream string
	status   int
}

// httpRequest counts one request to the MCP endpoint by HTTP method.
func (m *metrics) httpRequest(method string) {
	if m == nil {
		return
	}
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		method = "other" // a client chooses the method: keep the label bounded
	}
	counter(&m.requestCounters, m.requests, method).Inc()
}

// rpcMethods are the MCP methods counted by name in mcpgate_rpc_requests_total;
// any other is counted as "other", since the client chooses the method.
var rpcMethods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
	"server/discover": true, "subscriptions/listen": true, // 2026-07-28
	"tasks/get": true, "tasks/list": true, "tasks/result": true, "tasks/cancel": true, "tasks/update": true,
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
}

// rpcMethod counts one JSON-RPC message by its method. The front door calls
// it for the messages it answers itself (the fast path, the task door);
// countMethods for those go-sdk serves.
func (m *metrics) rpcMethod(method string) {
	if m == nil {
		return
	}
	if !rpcMethods[method] {
		method = "other"
	}
	counter(&m.rpcCounters, m.rpc, method).Inc()
}

// countMethods is go-sdk middleware that counts each message go-sdk serves,
// over HTTP and stdio alike.
func (m *metrics) countMethods(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		m.rpcMethod(method)
		return next(ctx, method, req)
	}
}

// Reasons the front door refuses a request, as mcpgate_http_refused_total's
// reason label.
const (
	refusedTooLarge   = "body_too_large"
	refusedTimeout    = "body_timeout"
	refusedUnreadable = "body_unreadable"
	refusedSessionCap = "session_cap"
	refusedCallerCap  = "caller_session_cap" // max_sessions_per_caller
	refusedBadID      = "bad_id"             // a number id go-sdk would not echo as sent (checkID)
)

// refuse counts one request the front door refused.
func (m *metrics) refuse(reason string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(reason).Inc()
}

// refuseMessage counts a body checkMessage refused, by why: not JSON, a
// batch, or JSON that is not an object.
func (m *metrics) refuseMessage(body []byte, e *jsonrpc.Error) {
	if m == nil {
		return
	}
	reason := "not_object"
	switch {
	case e.Code == jsonrpc.CodeParseError:
		reason = "parse_error"
	case bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")):
		reason = "batch"
	}
	m.refused.WithLabelValues(reason).Inc()
}

// playbookRun counts one finished playbook run ([Gateway.logRun] calls it,
// for every front end), by the playbook's tool name (bounded by the
// catalog) and its playbook.State (succeeded, failed, timeout, cancelled,
// not_started).
func (m *metrics) playbookRun(playbook, outcome string) {
	if m == nil {
		return
	}
	m.playbooks.WithLabelValues(playbook, outcome).Inc()
}

// callsInFlight is mcpgate_tool_calls_in_flight of one upstream: c's slots
// held by tool calls, and the playbook calls waiting on r's runs (r nil:
// no playbooks). The counts are read one after the other, without a lock:
// a scrape may be off by the one request that took or gave back a slot
// between the reads, never below zero.
func callsInFlight(c *upstream.Client, r *playbook.Runner) int {
	n := c.InFlight() - c.SendsInFlight()
	if r != nil {
		n += r.Waiting()
	}
	return max(n, 0)
}

// playbookRunEnded times one playbook run that ended
// (playbook.Options.OnRunEnd), by its tool and its state.
func (m *metrics) playbookRunEnded(e playbook.RunEnd) {
	if m == nil {
		return
	}
	m.runTimes.WithLabelValues(e.Tool, string(e.State)).Observe(e.Elapsed.Seconds())
}

// statusLabels holds the code label of every status 100–599, built once so
// that counting an answer allocates nothing: the code itself when HTTP's
// registry knows it (about 60 values), else its class ("5xx"), so that an
// upstream answering odd codes cannot add hundreds of series.
var statusLabels = func() (l [600]string) {
	for code := 100; code < 600; code++ {
		if http.StatusText(code) != "" {
			l[code] = strconv.Itoa(code)
		} else {
			l[code] = strconv.Itoa(code/100) + "xx"
		}
	}
	return l
}()

func statusLabel(code int) string {
	if code < 100 || code >= 600 {
		return "other"
	}
	return statusLabels[code]
}
