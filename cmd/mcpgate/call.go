package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/http/httpguts"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// mcpgate call is NoETL's `mcp` tool kind as a command: one MCP request to a
// server over Streamable HTTP (initialize, notifications/initialized, then
// the method), its answer printed as one JSON object in the shape the tool
// returns to a workflow step, for scripts and for checking a server by hand.

const (
	// callDefaultProtocol is the version offered in initialize: the newest
	// that initialize negotiates (2026-07-28 has no initialize).
	callDefaultProtocol = "2025-11-25"
	// callMaxPages bounds tools/list's pages: a server that keeps answering
	// with a nextCursor must not hold the command for ever.
	callMaxPages = 100
	// callMaxHealthBody bounds the health body kept as text.
	callMaxHealthBody = 1 << 20
	// maxExactID bounds --request-id: JSON numbers are exact integers up
	// to 2^53, and go-sdk makes ids from float64.
	maxExactID = 1 << 53
)

// callRequest is what a call sends and where: the flags and environment,
// resolved and checked.
type callRequest struct {
	server    string // the slug or upstream name, for the output only
	endpoint  string
	method    string
	tool      string
	arguments json.RawMessage // tools/call: a JSON object
	params    json.RawMessage // other methods: a JSON object, or nil
	timeout   time.Duration
	requestID int64
	protocol  string
	client    mcp.Implementation
	header    http.Header // --header, sent on every request
}

// callOutput is the one JSON object call prints: the shape NoETL's mcp tool
// returns, so a step that moves from the tool to the command reads the same
// fields.
type callOutput struct {
	Status    string          `json:"status"` // ok or error
	Server    string          `json:"server,omitempty"`
	Endpoint  string          `json:"endpoint"`
	Method    string          `json:"method"`
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Healthy   *bool           `json:"healthy,omitempty"` // health only
	// Text is the result's text contents joined with "\n", else the result
	// as compact JSON; for a failure with no result, the error.
	Text       string          `json:"text"`
	Result     json.RawMessage `json:"result,omitempty"`
	Initialize json.RawMessage `json:"initialize,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// call runs mcpgate call. Its exit status is 0 when the answer is ok; 1
// when it is an error, which the JSON on stdout carries and stderr's one
// line repeats; 2 on bad usage, with nothing on stdout.
func (m *cli) call(ctx context.Context, args []string) error {
	req, err := parseCall(args, os.Getenv)
	if err != nil {
		return err
	}
	out := doCall(ctx, req)
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if _, err := m.stdout.Write(append(b, '\n')); err != nil {
		return err
	}
	if out.Status != "ok" {
		return &exitError{1, errors.New(out.Error)}
	}
	return nil
}

// parseCall resolves the command line and the environment (getenv) into a
// request. Every problem is a usage error: nothing has been sent.
func parseCall(args []string, getenv func(string) string) (*callRequest, error) {
	fs := flag.NewFlagSet("mcpgate call", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "the server's Streamable HTTP `URL` (default: from --server, --config or the environment)")
	server := fs.String("server", "", "server `SLUG`: its endpoint is MCPGATE_MCP_<SLUG>_ENDPOINT or NOETL_MCP_<SLUG>_ENDPOINT (default MCPGATE_MCP_URL, then NOETL_MCP_URL)")
	config := fs.String("config", "", "gateway configuration `file` whose --upstream has an mcp: {url: …} or {server: …} block")
	upstream := fs.String("upstream", "", "the upstream of --config to call, by `name`")
	method := fs.String("method", "tools/call", "JSON-RPC `method`: tools/call, tools/list (every page), health (GET /healthz) or any other, sent with --params")
	tool := fs.String("tool", "", "the `tool` of tools/call")
	arguments := fs.String("arguments", "", "the tool's arguments, a JSON `object` (default {})")
	params := fs.String("params", "", "params of any other method, a JSON `object` (default none)")
	var timeout durationOrSeconds
	fs.Var(&timeout, "timeout", "bound on the whole exchange: a `DURATION` (30s) or seconds (default MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS, then NOETL_MCP_REQUEST_TIMEOUT_SECONDS, then 60s)")
	requestID := fs.Int64("request-id", 1, "JSON-RPC `id` of the method's request (initialize takes the next one)")
	protocol := fs.String("protocol-version", callDefaultProtocol, "protocol `version` offered in initialize")
	clientName := fs.String("client-name", "mcpgate-call", "clientInfo `name` in initialize")
	clientVersion := fs.String("client-version", gateway.Version, "clientInfo `version` in initialize")
	var headers stringList
	fs.Var(&headers, "header", "add the header `'Name: value'` to every request (repeatable)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}

	r := &callRequest{
		server:    *server,
		method:    *method,
		tool:      *tool,
		timeout:   timeout.d,
		requestID: *requestID,
		protocol:  *protocol,
		client:    mcp.Implementation{Name: *clientName, Version: *clientVersion},
		header:    http.Header{},
	}
	if r.requestID < -maxExactID || r.requestID > maxExactID-callMaxPages-1 {
		// go-sdk's ids are float64 on the way in: keep them exact, with
		// room for initialize's and the pages' ids after it.
		return nil, usagef(fs, "--request-id: out of range (±2^53)")
	}
	for i, h := range headers {
		name, value, err := parseHeader(h)
		if err != nil {
			// By position, never by its text: the value may be a token.
			return nil, usagef(fs, "--header #%d: %v", i+1, err)
		}
		r.header.Add(name, value)
	}

	if err := r.resolveEndpoint(fs, *endpoint, *config, *upstream, getenv); err != nil {
		return nil, err
	}
	if r.timeout == 0 {
		d, ok, err := federation.RequestTimeout(getenv)
		switch {
		case err != nil:
			return nil, usagef(fs, "%v", err)
		case ok:
			r.timeout = d
		default:
			r.timeout = federation.DefaultRequestTimeout
		}
	}

	switch r.method {
	case "":
		return nil, usagef(fs, "--method: empty")
	case "tools/call":
		if r.tool == "" {
			return nil, usagef(fs, "--tool: required with --method tools/call")
		}
		r.arguments = json.RawMessage(`{}`)
		if *arguments != "" {
			obj, err := jsonObject(*arguments)
			if err != nil {
				return nil, usagef(fs, "--arguments: %v", err)
			}
			r.arguments = obj
		}
		if *params != "" {
			return nil, usagef(fs, "--params: not with --method tools/call: use --tool and --arguments")
		}
	default:
		for _, f := range []struct{ name, value string }{{"tool", *tool}, {"arguments", *arguments}} {
			if f.value != "" {
				return nil, usagef(fs, "--%s: only with --method tools/call", f.name)
			}
		}
		if *params != "" {
			if r.method == "tools/list" || r.method == "health" {
				return nil, usagef(fs, "--params: not with --method %s", r.method)
			}
			obj, err := jsonObject(*params)
			if err != nil {
				return nil, usagef(fs, "--params: %v", err)
			}
			r.params = obj
		}
	}
	return r, nil
}

// resolveEndpoint sets r.endpoint from --endpoint, --config and --upstream,
// or the environment, in NoETL's order.
func (r *callRequest) resolveEndpoint(fs *flag.FlagSet, endpoint, config, upstream string, getenv func(string) string) error {
	source := "--endpoint"
	switch {
	case config != "" && upstream == "":
		return usagef(fs, "--config: name the upstream to call with --upstream")
	case upstream != "" && config == "":
		return usagef(fs, "--upstream: only with --config")
	case config != "" && (endpoint != "" || r.server != ""):
		return usagef(fs, "--config: not with --endpoint or --server")
	case config != "":
		mcpURL, slug, err := readCallConfig(config, upstream)
		if err != nil {
			return &exitError{2, flagError("--config", config, err)}
		}
		r.server = upstream
		if endpoint = mcpURL; endpoint == "" {
			if endpoint, source, err = federation.Endpoint(slug, getenv); err != nil {
				return &exitError{2, fmt.Errorf("--config %s: upstream %s: %v", config, upstream, err)}
			}
		} else {
			source = fmt.Sprintf("--config %s: upstream %s: mcp.url", config, upstream)
		}
	case endpoint == "":
		var err error
		if endpoint, source, err = federation.Endpoint(r.server, getenv); err != nil {
			return usagef(fs, "name the server: --endpoint URL, --server SLUG or --config F --upstream NAME (%v)", err)
		}
	}
	endpoint = strings.TrimRight(strings.TrimSpace(endpoint), "/")
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL may carry credentials: say what is wrong, not what it is.
		return usagef(fs, "%s: not an http(s) URL with a host", source)
	}
	r.endpoint = endpoint
	return nil
}

// readCallConfig returns the mcp block of the upstream named name in the
// gateway configuration file path (read as serve reads it, unknown keys
// refused): its url, else its server slug.
func readCallConfig(path, name string) (mcpURL, slug string, err error) {
	c, err := gateway.LoadConfig(path)
	if err != nil {
		return "", "", err
	}
	for _, u := range c.Upstreams {
		if u.Name != name {
			continue
		}
		switch {
		case u.MCP == nil:
			return "", "", fmt.Errorf("upstream %s: not an MCP upstream (no mcp: block)", name)
		case len(u.MCP.Command) > 0:
			return "", "", fmt.Errorf("upstream %s: mcp.command: call speaks Streamable HTTP only; run the server with an HTTP transport and use --endpoint", name)
		case u.MCP.URL != "" && u.MCP.Server != "":
			return "", "", fmt.Errorf("upstream %s: mcp: url and server both set", name)
		case u.MCP.URL == "" && u.MCP.Server == "":
			return "", "", fmt.Errorf("upstream %s: mcp: set url or server", name)
		}
		return u.MCP.URL, u.MCP.Server, nil
	}
	return "", "", fmt.Errorf("no upstream named %q", name)
}

// parseHeader splits "Name: value". Its errors never quote the header.
func parseHeader(h string) (name, value string, err error) {
	name, value, ok := strings.Cut(h, ":")
	if !ok {
		return "", "", errors.New(`want "Name: value": no ":"`)
	}
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !httpguts.ValidHeaderFieldName(name) {
		return "", "", errors.New(`want "Name: value": the name is not a valid header name`)
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return "", "", errors.New("the value has a character a header cannot carry")
	}
	return http.CanonicalHeaderKey(name), value, nil
}

// jsonObject checks that s is one JSON object and returns it compacted.
func jsonObject(s string) (json.RawMessage, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// durationOrSeconds is a flag of a positive duration: "30s", or a bare
// number of seconds as the environment variables take ("30", "2.5").
type durationOrSeconds struct{ d time.Duration }

func (d *durationOrSeconds) String() string {
	if d == nil || d.d == 0 {
		return ""
	}
	return d.d.String()
}

func (d *durationOrSeconds) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("%q is not a duration (30s) or a number of seconds", s)
		}
		v = time.Duration(f * float64(time.Second))
	}
	if v <= 0 {
		return fmt.Errorf("%q is not positive", s)
	}
	d.d = v
	return nil
}

// doCall runs the exchange and shapes its output. It never fails: every
// failure is an output with status error.
func doCall(ctx context.Context, r *callRequest) *callOutput {
	out := &callOutput{
		Server:    r.server,
		Endpoint:  redactURL(r.endpoint),
		Method:    r.method,
		Tool:      r.tool,
		Arguments: r.arguments,
	}
	var conns connSet
	defer conns.closeAll()
	base := http.DefaultTransport.(*http.Transport).Clone() // its proxy from the environment, its timeouts
	base.DialContext = conns.dial(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	rt := &callTransport{base: base, header: r.header, done: ctx.Done(), origin: urlOrigin(r.endpoint)}
	client := &http.Client{Transport: rt}

	var err error
	if r.method == "health" {
		err = health(ctx, client, r, out)
	} else {
		err = exchange(ctx, client, rt, r, out)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = timeoutError(ctx, err, r.timeout)
		}
		out.Status = "error"
		out.Error = err.Error()
		if out.Text == "" {
			out.Text = out.Error
		}
		return out
	}
	out.Status = "ok"
	return out
}

// timeoutError says that the deadline or a cancellation ended the step
// that err is about.
func timeoutError(ctx context.Context, err error, d time.Duration) error {
	step, _, _ := strings.Cut(err.Error(), ":")
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: timed out after %v", step, d)
	}
	return fmt.Errorf("%s: canceled", step)
}

// health is NoETL's health action: GET <endpoint>/healthz.
func health(ctx context.Context, client *http.Client, r *callRequest, out *callOutput) error {
	u := healthURL(r.endpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("health: %v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %v", transportCause(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, callMaxHealthBody))
	healthy := resp.StatusCode/100 == 2
	out.Healthy = &healthy
	out.Text = string(body)
	if !healthy {
		return fmt.Errorf("health: GET %s: HTTP %s", redactURL(u), resp.Status)
	}
	if err != nil {
		return fmt.Errorf("health: reading the answer: %v", err)
	}
	return nil
}

// healthURL is NoETL's rule: an endpoint whose whole path is /mcp, /sse or
// /message is served beside /healthz; any other path has /healthz
// appended. The query goes.
func healthURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint + "/healthz"
	}
	switch p := strings.TrimRight(u.Path, "/"); p {
	case "/mcp", "/sse", "/message":
		u.Path = "/healthz"
	default:
		u.Path = p + "/healthz"
	}
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

// exchange runs initialize, notifications/initialized and the method over
// go-sdk's Streamable HTTP client connection, writing and reading raw
// JSON-RPC messages so that any method passes through as it is.
func exchange(ctx context.Context, client *http.Client, rt *callTransport, r *callRequest, out *callOutput) error {
	t := &mcp.StreamableClientTransport{
		Endpoint:   r.endpoint,
		HTTPClient: client,
		// One request and its answer: no stream for the server's own
		// messages. (go-sdk opens it only for its Client, whose session
		// state a raw Connection never sees; this says so.)
		DisableStandaloneSSE: true,
	}
	conn, err := t.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect: %v", err)
	}
	defer conn.Close() // ends the session (DELETE) if the server gave one
	s := &callSession{conn: conn, rt: rt}

	initParams, err := json.Marshal(&mcp.InitializeParams{
		ProtocolVersion: r.protocol,
		Capabilities:    &mcp.ClientCapabilities{},
		ClientInfo:      &r.client,
	})
	if err != nil {
		return fmt.Errorf("initialize: %v", err)
	}
	initResult, err := s.call(ctx, "initialize", r.requestID+1, initParams)
	if err != nil {
		return err
	}
	out.Initialize = initResult
	var negotiated struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(initResult, &negotiated); err != nil || negotiated.ProtocolVersion == "" {
		return errors.New("initialize: the result has no protocolVersion")
	}
	// Later requests carry the negotiated version (MCP 2025-06-18,
	// "Protocol Version Header"): go-sdk sets it only for its Client.
	rt.setProtocolVersion(negotiated.ProtocolVersion)
	if err := s.notify(ctx, "notifications/initialized"); err != nil {
		return err
	}

	var result json.RawMessage
	switch r.method {
	case "tools/call":
		params, err := json.Marshal(struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{r.tool, r.arguments})
		if err != nil {
			return fmt.Errorf("tools/call: %v", err)
		}
		result, err = s.call(ctx, r.method, r.requestID, params)
		if err != nil {
			return err
		}
	case "tools/list":
		if result, err = s.listTools(ctx, r.requestID); err != nil {
			return err
		}
	default:
		if result, err = s.call(ctx, r.method, r.requestID, r.params); err != nil {
			return err
		}
	}
	out.Result = normalizeResult(result)
	out.Text = resultText(out.Result)
	if r.method == "tools/call" {
		var ce struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(out.Result, &ce) == nil && ce.IsError {
			return fmt.Errorf("tools/call: tool %q returned isError: %s", r.tool, clip(oneLine(out.Text), 300))
		}
	}
	return nil
}

// callSession is the client end of one exchange: requests go out one at a
// time and each waits for its answer.
type callSession struct {
	conn mcp.Connection
	rt   *callTransport
}

// call sends one request and returns its result. An error names the
// method and what failed: the connection, the HTTP status, or the JSON-RPC
// error's code and message.
func (s *callSession) call(ctx context.Context, method string, id int64, params json.RawMessage) (json.RawMessage, error) {
	rid, err := jsonrpc.MakeID(float64(id)) // exact: parseCall bounds the ids
	if err != nil {
		return nil, fmt.Errorf("%s: %v", method, err)
	}
	s.rt.resetStatus()
	if err := s.conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: params}); err != nil {
		return nil, s.failure(method, err)
	}
	for {
		msg, err := s.conn.Read(ctx)
		if err != nil {
			return nil, s.failure(method, err)
		}
		switch msg := msg.(type) {
		case *jsonrpc.Response:
			if msg.ID != rid {
				continue // not ours: nothing else is in flight
			}
			if msg.Error != nil {
				return nil, s.failure(method, msg.Error)
			}
			return msg.Result, nil
		case *jsonrpc.Request:
			// Notifications (progress, logs) are not the answer. A
			// request of the server's (sampling, elicitation, roots) gets
			// an answer, so the server does not wait on it: this client
			// declared no capabilities.
			if msg.IsCall() {
				if err := s.answer(ctx, msg); err != nil {
					return nil, s.failure(method, err)
				}
			}
		}
	}
}

func (s *callSession) answer(ctx context.Context, req *jsonrpc.Request) error {
	resp := &jsonrpc.Response{ID: req.ID}
	if req.Method == "ping" {
		resp.Result = json.RawMessage(`{}`)
	} else {
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpgate call answers no requests but ping"}
	}
	return s.conn.Write(ctx, resp)
}

func (s *callSession) notify(ctx context.Context, method string) error {
	s.rt.resetStatus()
	if err := s.conn.Write(ctx, &jsonrpc.Request{Method: method}); err != nil {
		return s.failure(method, err)
	}
	return nil
}

// listTools fetches every page of tools/list, following nextCursor, and
// returns one result with all the tools. The first page's request has id;
// the next ones the ids after initialize's.
func (s *callSession) listTools(ctx context.Context, id int64) (json.RawMessage, error) {
	var (
		tools  []json.RawMessage
		cursor string
		seen   = map[string]bool{}
	)
	for page := 0; ; page++ {
		if page == callMaxPages {
			return nil, fmt.Errorf("tools/list: more than %d pages", callMaxPages)
		}
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(struct {
				Cursor string `json:"cursor"`
			}{cursor})
		}
		pid := id
		if page > 0 {
			pid = id + 1 + int64(page)
		}
		res, err := s.call(ctx, "tools/list", pid, params)
		if err != nil {
			return nil, err
		}
		var p struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &p); err != nil {
			return nil, fmt.Errorf("tools/list: the result is not a tool list: %v", err)
		}
		tools = append(tools, p.Tools...)
		if p.NextCursor == "" {
			break
		}
		if seen[p.NextCursor] {
			return nil, errors.New("tools/list: the server repeated a nextCursor")
		}
		seen[p.NextCursor] = true
		cursor = p.NextCursor
	}
	if tools == nil {
		tools = []json.RawMessage{}
	}
	return json.Marshal(struct {
		Tools []json.RawMessage `json:"tools"`
	}{tools})
}

// failure names what failed in a step: the HTTP status the server
// answered, the JSON-RPC error, or the connection's own error without the
// request's URL.
func (s *callSession) failure(method string, err error) error {
	var parts []string
	if code, status := s.rt.status(); code != 0 && code/100 != 2 {
		parts = append(parts, "HTTP "+status)
	}
	var ue *url.Error
	switch we := wireError(err); {
	case errors.As(err, &ue): // the request did not reach the server
		parts = append(parts, ue.Err.Error())
	case we != nil:
		parts = append(parts, fmt.Sprintf("JSON-RPC error %d: %s", we.Code, we.Message))
	case len(parts) == 0:
		parts = append(parts, err.Error())
	}
	return fmt.Errorf("%s: %s", method, strings.Join(parts, ": "))
}

// wireError is the server's JSON-RPC error in err's tree, if any. go-sdk
// wraps its own sentinel, "rejected by transport", which is itself a
// JSON-RPC error, beside the server's: it is not the server's answer.
func wireError(err error) *jsonrpc.Error {
	switch e := err.(type) {
	case nil:
		return nil
	case *jsonrpc.Error:
		if e.Code == rejectedCode && e.Message == "rejected by transport" {
			return nil
		}
		return e
	case interface{ Unwrap() []error }:
		for _, e := range e.Unwrap() {
			if we := wireError(e); we != nil {
				return we
			}
		}
		return nil
	case interface{ Unwrap() error }:
		return wireError(e.Unwrap())
	}
	return nil
}

// rejectedCode is go-sdk's (internal) jsonrpc2.ErrRejected's code.
const rejectedCode = -32005

// transportCause is err without the URL that net/http's errors quote: the
// endpoint's query may carry a token, and the output names the endpoint
// already.
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// normalizeResult is NoETL's: an absent or null result is {}, one that is
// not an object is {"value": result}.
func normalizeResult(r json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(r)
	switch {
	case len(t) == 0 || string(t) == "null":
		return json.RawMessage(`{}`)
	case t[0] != '{':
		b, _ := json.Marshal(struct {
			Value json.RawMessage `json:"value"`
		}{t})
		return b
	}
	return t
}

// resultText is the result's text contents joined with "\n", else the
// result as compact JSON.
func resultText(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(result, &r) == nil {
		var texts []string
		for _, c := range r.Content {
			if c.Type == "text" && c.Text != nil {
				texts = append(texts, *c.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, result) != nil {
		return string(result)
	}
	return b.String()
}

// clip cuts s to at most n bytes, on a character's boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// redactURL hides a password in the URL's user info.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Redacted()
}

// connSet holds the connections a call opened, to close them all when it
// ends. Closing the idle ones is not enough: go-sdk reads the end of an
// answer's SSE stream in a goroutine of its own, which can hand the
// connection back to the idle pool after the call is over, where it would
// stay open (and a server's graceful shutdown wait for it) until the idle
// timeout.
type connSet struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func (s *connSet) dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			c.Close()
			return nil, net.ErrClosed
		}
		s.conns = append(s.conns, c)
		return c, nil
	}
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		c.Close()
	}
}

// callTransport adds call's headers to every request, the negotiated
// protocol version once initialize has answered, and records the status of
// the last answer so an error can name it. The exchange is sequential.
type callTransport struct {
	base   http.RoundTripper
	header http.Header
	done   <-chan struct{} // the exchange's deadline
	// origin is the endpoint's scheme and host: the headers (a token,
	// often) go there only, not to where a redirect leads.
	origin string

	mu         sync.Mutex
	protocol   string
	statusCode int
	statusText string
}

func (t *callTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete {
		select {
		case <-t.done:
			// The session's end is a courtesy, and a server may hold it
			// until the handler still running ends (go-sdk does; its
			// client waits 5 s): past the deadline, the session is left
			// to expire.
			return nil, errors.New("mcpgate call: past the deadline: not ending the session")
		default:
		}
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change its request
	for k, v := range t.header {
		if urlOrigin(req.URL.String()) != t.origin {
			break // a redirect to another origin: it gets none of them
		}
		if k == "Host" {
			req.Host = v[0]
			continue
		}
		req.Header[k] = v
	}
	t.mu.Lock()
	if t.protocol != "" && req.Header.Get("Mcp-Protocol-Version") == "" {
		req.Header.Set("Mcp-Protocol-Version", t.protocol)
	}
	t.mu.Unlock()
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		t.mu.Lock()
		t.statusCode, t.statusText = resp.StatusCode, resp.Status
		t.mu.Unlock()
	}
	return resp, err
}

// urlOrigin is a URL's scheme and host (with its port), lower-cased; ""
// when it does not parse.
func urlOrigin(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

func (t *callTransport) setProtocolVersion(v string) {
	t.mu.Lock()
	t.protocol = v
	t.mu.Unlock()
}

func (t *callTransport) resetStatus() {
	t.mu.Lock()
	t.statusCode, t.statusText = 0, ""
	t.mu.Unlock()
}

func (t *callTransport) status() (int, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.statusCode, t.statusText
}
