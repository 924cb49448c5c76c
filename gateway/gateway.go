// Package gateway wires mcpgate together: configuration → catalog of tools →
// an MCP server (from the official go-sdk), served over Streamable HTTP at /mcp
// or over stdio. Each tool call is forwarded to its upstream API with the
// caller's bearer token.
//
// A Go service can embed the gateway in-process: give an [Upstream] a Handler
// (the service's own http.Handler) and mount [Gateway.Handler] beside it.
package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/upstream"
)

// Version is the gateway's version, reported in initialize.
var Version = "0.1.0-dev"

// Options configures a [Gateway]. The zero value is ready to use.
type Options struct {
	// Logger receives the gateway's logs. Nil means no logging. Tokens,
	// cookies and claims are never logged.
	Logger *slog.Logger
	// StaticToken, if set, is sent upstream as a bearer token on calls that
	// arrive without an Authorization header of their own. It is meant for
	// stdio, where a local user runs the gateway on their own behalf; an HTTP
	// gateway should leave it empty, so that callers cannot borrow it.
	StaticToken string
	// Lock, if set, is the reviewed catalog (see annotations.Lock): a tool
	// that is not in it, or whose hints, operation or input schema changed
	// since, is not exposed, so that a spec change cannot widen what agents
	// may do without a review. Drift reports what was held back.
	Lock *annotations.Lock
}

// Gateway serves one catalog. It is safe for concurrent use.
type Gateway struct {
	cfg     *Config
	opts    Options
	logger  *slog.Logger
	catalog *Catalog
	server  *mcp.Server
	drift   *annotations.Drift
	served  int           // tools registered: the catalog less what the lock held back
	calls   *callContexts // the POSTs being served, for the tool handlers (see frontDoor)
}

// New validates cfg, loads every upstream's document and builds the catalog and
// the MCP server.
func New(ctx context.Context, cfg *Config, opts *Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, calls: &callContexts{}}
	if opts != nil {
		g.opts = *opts
	}
	g.logger = g.opts.Logger
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	// Serving does not wait for the documents' validation, which only
	// reports: its warnings are logged when it ends.
	logger := g.logger
	cat, err := BuildCatalogWith(ctx, cfg, &CatalogOptions{Validated: func(ws []string) {
		for _, w := range ws {
			logger.Warn("openapi document", "warning", w)
		}
	}})
	if err != nil {
		return nil, err
	}
	if cat.ServeErr != nil {
		return nil, cat.ServeErr
	}
	g.catalog = cat
	g.server = mcp.NewServer(&mcp.Implementation{Name: "mcpgate", Title: "mcpgate", Version: Version}, &mcp.ServerOptions{
		Logger:       g.sdkLogger(),
		Instructions: "Tools generated from REST APIs' OpenAPI documents. Each tool's annotations say whether it reads or writes.",
		Capabilities: &mcp.ServerCapabilities{
			// listChanged is not advertised: a stateless POST has no
			// stream to notify on, and in stateful mode the catalog is
			// fixed for the life of the process (there is no reload yet),
			// so no notification would ever come.
			Tools:   &mcp.ToolCapabilities{ListChanged: false},
			Logging: &mcp.LoggingCapabilities{},
		},
	})
	if g.opts.Lock != nil {
		g.drift = annotations.Compare(g.opts.Lock, cat.Facts())
	}
	for _, t := range cat.Tools {
		if g.drift.Drifted(t.Tool.Name) {
			continue
		}
		if t.IsPlaybook() {
			g.server.AddTool(t.Tool, g.playbookHandler(t))
		} else {
			g.server.AddTool(t.Tool, g.toolHandler(t))
		}
		g.served++
	}
	return g, nil
}

// Drift is how the catalog differs from Options.Lock (nil without a lock).
// Tools it names as added or changed are not served.
func (g *Gateway) Drift() *annotations.Drift { return g.drift }

// Served is the number of tools served: the catalog's, less any the lock held
// back.
func (g *Gateway) Served() int { return g.served }

// Catalog returns the tools built from the configuration (see Drift for those
// a lock held back).
func (g *Gateway) Catalog() *Catalog { return g.catalog }

// Server returns the MCP server, e.g. to connect it to a transport of one's
// own. To serve stdio, use [Gateway.ServeStdio].
func (g *Gateway) Server() *mcp.Server { return g.server }

// Handler returns the gateway's HTTP routes: /mcp (Streamable HTTP, behind
// the front door) and /healthz.
func (g *Gateway) Handler() http.Handler {
	return g.newMux()
}

func (g *Gateway) newMux() *mux.Router {
	r := mux.NewRouter()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{
			Stateless:           !g.cfg.Stateful,
			Logger:              g.sdkLogger(),
			SessionTimeout:      g.cfg.SessionTimeout,
			MaxRequestBodyBytes: g.cfg.MaxBodyBytes,
			// Ties handlers to the POST for 2026-07-28 requests; the front
			// door does it for every protocol version (see frontDoor).
			PropagateRequestCancellation: true,
		})
	fd := &frontDoor{
		next:        sdk,
		maxBody:     g.cfg.MaxBodyBytes,
		bodyTimeout: g.cfg.BodyTimeout,
		calls:       g.calls,
	}
	if g.cfg.Stateful {
		fd.sessions = newSessionBook(g.server, g.cfg.MaxSessions)
	}
	r.Handle("/mcp", fd)
	// NoETL's playbook-as-MCP endpoint; {path} may hold "/" (see playbook_jsonrpc.go).
	r.HandleFunc("/api/mcp/playbook/{path:.+}/jsonrpc", g.servePlaybookRPC).Methods(http.MethodPost)
	r.HandleFunc("/healthz", g.serveHealth).Methods(http.MethodGet, http.MethodHead)
	r.Use(g.accessLog)
	return r
}

// sdkLogger is the logger handed to go-sdk: the gateway's, less everything
// below warn. go-sdk logs session ids at info ("server session connected",
// "session_id"), and a session id is a bearer credential for its session; at
// warn and error (v1.8.0) it logs none.
func (g *Gateway) sdkLogger() *slog.Logger {
	return slog.New(minLevel{g.logger.Handler(), slog.LevelWarn})
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.min {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

func (g *Gateway) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": "ok", "tools": g.served})
}

// accessLog logs one line per HTTP request: method, path, status, duration.
// Never headers: they carry tokens and cookies.
func (g *Gateway) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.logger.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		g.logger.LogAttrs(r.Context(), slog.LevelDebug, "http request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("elapsed", time.Since(start)))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets streamed (SSE) responses through the logging wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (g *Gateway) toolHandler(t *Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := upstream.DecodeArguments(req.Params.Arguments)
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(err)
			g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeInvalidArguments, Cause: err})
			return res, nil
		}
		// Cancel the upstream call when the client's POST ends: go-sdk does
		// not (see frontDoor).
		if req.Extra != nil {
			var cancel context.CancelFunc
			ctx, cancel = g.calls.join(ctx, req.Extra.Header)
			defer cancel()
		}
		res, rep := t.Client.Call(ctx, t.Binding, args, g.credentials(req))
		g.logCall(ctx, t, req, rep)
		return res, nil
	}
}

// logCall writes the one line a tool call leaves: tool, upstream, HTTP status,
// duration, outcome and the front door's request id; a call that failed on
// the upstream's side or the gateway's is a warning, with its cause. Never
// the arguments, tokens, cookies or session ids: the cause is a transport or
// mapping error, which holds none of them.
func (g *Gateway) logCall(ctx context.Context, t *Tool, req *mcp.CallToolRequest, rep upstream.Report) {
	level := slog.LevelInfo
	if rep.Failed() {
		level = slog.LevelWarn
	}
	if !g.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("tool", t.Tool.Name), slog.String("upstream", t.Upstream),
		slog.Int("status", rep.Status), slog.Duration("elapsed", rep.Elapsed),
		slog.String("outcome", string(rep.Outcome)))
	if req.Extra != nil && req.Extra.Header != nil {
		if id := req.Extra.Header.Get(requestIDHeader); id != "" {
			attrs = append(attrs, slog.String("request_id", id))
		}
	}
	if rep.Failed() && rep.Cause != nil {
		attrs = append(attrs, slog.String("cause", rep.Cause.Error()))
	}
	g.logger.LogAttrs(ctx, level, "tool call", attrs...)
}

// credentials picks what the upstream is shown: the caller's own bearer token
// when the call came over HTTP with one, else the static token (stdio).
// No other inbound header is forwarded.
func (g *Gateway) credentials(req *mcp.CallToolRequest) upstream.Credentials {
	if req.Extra != nil && req.Extra.Header != nil {
		if tok, ok := bearerToken(req.Extra.Header.Get("Authorization")); ok {
			return upstream.Credentials{BearerToken: tok}
		}
		return upstream.Credentials{}
	}
	return upstream.Credentials{BearerToken: g.opts.StaticToken}
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" header
// (RFC 6750 §2.1; the scheme is case-insensitive).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
