package gateway

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// stdioPair is one catalog served over stdio twice: with the stdio fast path
// (stdioFast), and with the fast path turned off, go-sdk answering every
// line. answered counts the calls the fast path took.
type stdioPair struct {
	fast, sdk *Gateway
	answered  atomic.Int64
	logs      [2]*syncBuffer // fast, sdk: debug level
}

// stdioAPI is fastAPI, with a typed answer that breaks its output schema.
func stdioAPI(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/typed/99" {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"not a number","name":5}`)
		return
	}
	fastAPI(w, r)
}

// newStdioPair serves fastDoc's REST tools and, with playbooks, the example
// playbook engine's tools, both upstreams real HTTP servers, from two
// gateways.
func newStdioPair(t testing.TB, playbooks bool) *stdioPair {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(stdioAPI))
	t.Cleanup(api.Close)
	p := &stdioPair{}
	for i, disable := range []bool{false, true} {
		e := engine.New(&engine.Options{NumericIDs: true})
		pb := httptest.NewServer(e.Handler())
		t.Cleanup(pb.Close)
		cfg := &Config{Upstreams: []Upstream{
			{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: api.URL, Timeout: time.Minute, Auth: auth.Upstream{Mode: auth.ModeForward}},
		}}
		if playbooks {
			cfg.Upstreams = append(cfg.Upstreams, Upstream{Name: "noetl", OpenAPI: pb.URL + "/openapi.json", BaseURL: pb.URL, Playbooks: &Playbooks{}, Auth: auth.Upstream{Mode: auth.ModeNone}})
		}
		p.logs[i] = &syncBuffer{}
		g, err := New(context.Background(), cfg, &Options{DisableFastPath: disable,
			Logger: slog.New(slog.NewTextHandler(p.logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		if disable {
			if g.stdioFast() != nil {
				t.Fatal("DisableFastPath: the stdio fast path is still on")
			}
			p.sdk = g
		} else {
			if g.stdioFast() == nil {
				t.Fatal("the stdio fast path is off")
			}
			g.fast.onServe = func() { p.answered.Add(1) }
			p.fast = g
		}
	}
	return p
}

// normalised is an answer line parsed and marshaled again: the same JSON
// values compare equal whatever their spacing, key order or escaping.
func normalised(t testing.TB, line string) string {
	t.Helper()
	var parts []string
	for l := range strings.SplitSeq(line, "\n") {
		var v any
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		b, _ := json.Marshal(v)
		parts = append(parts, string(b))
	}
	slices.Sort(parts)
	return strings.Join(parts, "\n")
}

// htmlUnescaped undoes the escapes of <, > and & that go-sdk's
// CallToolResult.MarshalJSON (encoding/json) writes in a result and the
// fast path does not (appendJSONString): the same JSON strings.
var htmlUnescaped = strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&")

// TestStdioFastDifferential sends each line over stdio, after initialize,
// to the gateway with its stdio fast path and to the one without (go-sdk
// answers every line), and requires the same answers. It also requires that the fast path
// took exactly the calls it is meant to, so that a fast path that handed
// everything to go-sdk could not pass.
func TestStdioFastDifferential(t *testing.T) {
	p := newStdioPair(t, true)
	init := func(version string) string {
		return `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	}
	tests := []struct {
		name    string
		version string // initialize's; "" is 2025-06-18
		line    string
		fast    bool // the fast path answers it (else go-sdk)
	}{
		{"call ok", "", rpc("10", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`), true},
		{"call ok, other meta", "", rpc("10", "tools/call", `{"name":"get_thing","arguments":{"id":"7"},"_meta":{"x":1}}`), true},
		{"call missing argument", "", rpc("11", "tools/call", `{"name":"get_thing","arguments":{}}`), true},
		{"call bad argument", "", rpc("12", "tools/call", `{"name":"get_thing","arguments":{"id":"far-too-long"}}`), true},
		{"call arguments not an object", "", rpc("13", "tools/call", `{"name":"get_thing","arguments":[1]}`), true},
		{"call no arguments", "", rpc("14", "tools/call", `{"name":"list_things"}`), true},
		{"call unknown tool", "", rpc("15", "tools/call", `{"name":"nope","arguments":{}}`), true},
		{"call unknown tool, odd name", "", rpc("15", "tools/call", `{"name":"a\"<é>\u0001\u2028","arguments":{}}`), true},
		{"call missing name", "", rpc("16", "tools/call", `{"arguments":{}}`), true},
		{"call name not a string", "", rpc("17", "tools/call", `{"name":5}`), false},
		{"call no params", "", rpc("18", "tools/call", ""), false},
		{"call null params", "", rpc("19", "tools/call", `null`), false},
		{"call upstream 500", "", rpc("20", "tools/call", `{"name":"fail"}`), true},
		{"call 204", "", rpc("21", "tools/call", `{"name":"empty"}`), true},
		{"call structured output", "", rpc("22", "tools/call", `{"name":"get_typed","arguments":{"id":3}}`), true},
		{"call output schema failure", "", rpc("22", "tools/call", `{"name":"get_typed","arguments":{"id":99}}`), true},
		{"call array answer", "", rpc(`"s"`, "tools/call", `{"name":"list_things","arguments":{}}`), true},
		{"call HTML where JSON declared", "", rpc("23", "tools/call", `{"name":"html"}`), true},
		{"call progressToken", "", rpc("24", "tools/call", `{"name":"list_things","_meta":{"progressToken":1}}`), false},
		{"call 2026 meta", "", rpc("25", "tools/call", `{"name":"list_things","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), false},
		{"call a task", "", rpc("26", "tools/call", `{"name":"list_things","task":{"ttl":1000}}`), false},
		{"call an argument named task", "", rpc("27", "tools/call", `{"name":"get_thing","arguments":{"id":"task"}}`), true},
		{"call string id", "", rpc(`"a-<b>&"`, "tools/call", `{"name":"get_thing","arguments":{"id":"1"}}`), true},
		{"call id 0", "", rpc("0", "tools/call", `{"name":"list_things"}`), true},
		{"call negative id", "", rpc("-42", "tools/call", `{"name":"list_things"}`), true},
		{"call id 2^53", "", rpc("9007199254740992", "tools/call", `{"name":"list_things"}`), true},
		{"call id beyond 2^53", "", rpc("9007199254740993000", "tools/call", `{"name":"list_things"}`), false},
		{"call id 1.5", "", rpc("1.5", "tools/call", `{"name":"list_things"}`), false},
		{"call notification", "", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"list_things"}}`, false},
		{"call ID in capitals", "", `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"list_things"}}`, false},
		{"call jsonrpc 1.0", "", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"list_things"}}`, false},
		{"call 2024-11-05", "2024-11-05", rpc("30", "tools/call", `{"name":"list_things"}`), true},
		{"call 2025-03-26", "2025-03-26", rpc("30", "tools/call", `{"name":"list_things"}`), true},
		{"call 2025-11-25", "2025-11-25", rpc("30", "tools/call", `{"name":"list_things"}`), true},
		{"call 2026-07-28", "2026-07-28", rpc("31", "tools/call", `{"name":"list_things"}`), false},
		{"call unknown version", "1999-01-01", rpc("32", "tools/call", `{"name":"list_things"}`), false},
		{"call a later version", "3000-01-01", rpc("33", "tools/call", `{"name":"list_things"}`), false},
		{"tools/list", "", rpc("40", "tools/list", ""), false},
		{"ping", "", rpc("41", "ping", ""), false},
		{"playbook greets", "", rpc("50", "tools/call", `{"name":"demo_fast","arguments":{"name":"Ada"}}`), true},
		{"playbook default workload", "", rpc("51", "tools/call", `{"name":"demo_fast","arguments":{}}`), true},
		{"playbook failed run", "", rpc("52", "tools/call", `{"name":"demo_fail","arguments":{}}`), true},
		{"playbook argument of the wrong type", "", rpc("53", "tools/call", `{"name":"demo_fast","arguments":{"name":5}}`), true},
		{"playbook progressToken: go-sdk's", "", rpc("54", "tools/call", `{"name":"demo_fast","arguments":{"name":"Di"},"_meta":{"progressToken":"p"}}`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			input := init(cmp.Or(tc.version, "2025-06-18")) + "\n" + stdioInitialized + "\n"
			// The call only once initialize is answered: a pipelined line
			// may be read before, and go to go-sdk (see stdio.Fast).
			before := p.answered.Load()
			got := serveSequenced(t, p.fast, input, tc.line)
			if fast := p.answered.Load() > before; fast != tc.fast {
				t.Errorf("answered by the fast path: %v, want %v", fast, tc.fast)
			}
			want := serveSequenced(t, p.sdk, input, tc.line)
			if len(got) != len(want) {
				t.Fatalf("fast path answers %q\ngo-sdk answers %q", got, want)
			}
			for id, w := range want {
				g, ok := got[id]
				if !ok {
					t.Errorf("no answer with id %s; go-sdk's: %s", id, w)
					continue
				}
				if htmlUnescaped.Replace(g) != htmlUnescaped.Replace(w) {
					t.Errorf("id %s, not byte for byte:\nfast: %s\n sdk: %s", id, g, w)
				}
				if normalised(t, g) != normalised(t, w) {
					t.Errorf("id %s differs:\nfast: %s\n sdk: %s", id, g, w)
				}
			}
		})
	}
}

// serveSequenced runs one stdio session of g: the lines of first, then,
// once the initialize answer is out, line, then the end of the input.
func serveSequenced(t testing.TB, g *Gateway, first, line string) map[string]string {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- g.ServeStdio(context.Background(), inR, outW)
		inR.Close() // a shutdown stops the reading: unblock the writes
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 16<<20)
	go func() {
		io.WriteString(inW, first)
	}()
	if !lines.Scan() || !strings.Contains(lines.Text(), `"id":"init","result"`) {
		t.Fatalf("initialize: %q", lines.Text())
	}
	go func() {
		io.WriteString(inW, line+"\n")
		inW.Close()
	}()
	got := map[string]string{}
	for lines.Scan() {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("a line that is not JSON: %q", lines.Text())
		}
		id := string(m.ID)
		if got[id] != "" {
			got[id] += "\n"
		}
		got[id] += lines.Text()
	}
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	return got
}

// TestStdioFastLogAndMetrics: a call the stdio fast path answers leaves the
// log line and the counts go-sdk's path leaves for it over stdio.
func TestStdioFastLogAndMetrics(t *testing.T) {
	p := newStdioPair(t, true)
	first := strings.Replace(stdioInit, `"id":1`, `"id":"init"`, 1) + "\n" + stdioInitialized + "\n"
	for _, line := range []string{
		rpc("1", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`),
		rpc("2", "tools/call", `{"name":"fail"}`),
		rpc("3", "tools/call", `{"name":"get_thing","arguments":{}}`),
		rpc("4", "tools/call", `{"name":"demo_fast","arguments":{"name":"Ada"}}`),
	} {
		before := p.answered.Load()
		serveSequenced(t, p.fast, first, line)
		serveSequenced(t, p.sdk, first, line)
		if p.answered.Load() == before {
			t.Fatalf("the fast path did not answer %s", line)
		}
	}
	// The lines of the calls, without their times and durations.
	varying := regexp.MustCompile(`time=\S+ |elapsed=\S+|run_id=\S+`)
	callLines := func(s string) []string {
		var out []string
		for l := range strings.SplitSeq(s, "\n") {
			if strings.Contains(l, `msg="tool call"`) || strings.Contains(l, `msg="playbook call"`) {
				out = append(out, varying.ReplaceAllString(l, ""))
			}
		}
		return out
	}
	got, want := callLines(p.logs[0].String()), callLines(p.logs[1].String())
	if len(want) < 4 || !slices.Equal(got, want) {
		t.Errorf("log lines differ:\nfast:\n%s\nsdk:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	counts := func(g *Gateway) string {
		rec := httptest.NewRecorder()
		g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		var out []string
		for l := range strings.SplitSeq(rec.Body.String(), "\n") {
			if strings.HasPrefix(l, "mcpgate_rpc_requests_total") || strings.HasPrefix(l, "mcpgate_tool_calls_total") ||
				strings.HasPrefix(l, "mcpgate_playbook_runs_total") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if got, want := counts(p.fast), counts(p.sdk); got != want || !strings.Contains(want, `method="tools/call"`) {
		t.Errorf("metrics differ:\nfast:\n%s\nsdk:\n%s", got, want)
	}
}

// TestStdioFastCancel: a notifications/cancelled for a call the stdio fast
// path runs cancels it at once — a playbook run is cancelled upstream at
// once (not after the runner's linger), a REST call's upstream request ends
// — and the session answers as go-sdk's does for the same lines.
func TestStdioFastCancel(t *testing.T) {
	type run struct {
		answers  map[string]string
		answered int64
	}
	playbook := func(t *testing.T, disable bool) run {
		e := engine.New(&engine.Options{Step: time.Hour, NumericIDs: true})
		logs := &syncBuffer{}
		cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
			Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond}}}}
		g, err := New(t.Context(), cfg, &Options{DisableFastPath: disable, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		var answered atomic.Int64
		if !disable {
			g.fast.onServe = func() { answered.Add(1) }
		}
		s := startStdio(t, g)
		s.send(t, strings.Replace(stdioInit, `"id":1`, `"id":"init"`, 1), stdioInitialized)
		s.next(t)
		s.send(t, call(41, "demo_slow", `{"label":"x"}`))
		waitFor(t, "the run to start", func() bool { return e.Counts().Started == 1 })
		s.send(t, cancelled("41"))
		waitFor(t, "the engine to see the cancel", func() bool { return e.Counts().Cancelled == 1 })
		waitFor(t, "the call's log line", func() bool { return strings.Contains(logs.String(), `msg="playbook call"`) })
		if line := logs.String(); !strings.Contains(line, "upstream_cancel=at_once") {
			t.Errorf("the run was not cancelled at once:\n%s", line)
		}
		s.in.Close()
		got, err := s.end(t)
		if err != nil {
			t.Errorf("ServeStdio = %v", err)
		}
		r := run{answers: map[string]string{}, answered: answered.Load()}
		for _, a := range got {
			r.answers[string(a.ID)] = a.line
		}
		return r
	}
	rest := func(t *testing.T, disable bool) run {
		api := &slowAPI{started: make(chan string, 1), release: make(chan struct{})}
		ended := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			api.ServeHTTP(w, r)
			if r.Context().Err() != nil {
				close(ended)
			}
		}))
		defer up.Close()
		cfg := &Config{Upstreams: []Upstream{{Name: "things", OpenAPI: "things.json", Document: []byte(testDoc), BaseURL: up.URL}}}
		g, err := New(t.Context(), cfg, &Options{DisableFastPath: disable})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		var answered atomic.Int64
		if !disable {
			g.fast.onServe = func() { answered.Add(1) }
		}
		s := startStdio(t, g)
		s.send(t, strings.Replace(stdioInit, `"id":1`, `"id":"init"`, 1), stdioInitialized)
		s.next(t)
		s.send(t, `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"get_thing","arguments":{"id":"slow"}}}`)
		<-api.started
		s.send(t, cancelled(`"c"`))
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream request did not end after notifications/cancelled")
		}
		s.in.Close()
		got, err := s.end(t)
		if err != nil {
			t.Errorf("ServeStdio = %v", err)
		}
		r := run{answers: map[string]string{}, answered: answered.Load()}
		for _, a := range got {
			r.answers[string(a.ID)] = a.line
		}
		return r
	}
	for name, f := range map[string]func(*testing.T, bool) run{"playbook": playbook, "rest": rest} {
		t.Run(name, func(t *testing.T) {
			fast := f(t, false)
			if fast.answered != 1 {
				t.Fatalf("the fast path answered %d calls, want 1", fast.answered)
			}
			sdk := f(t, true)
			if len(fast.answers) != len(sdk.answers) {
				t.Fatalf("answers differ:\nfast: %q\n sdk: %q", fast.answers, sdk.answers)
			}
			for id, w := range sdk.answers {
				if g := fast.answers[id]; normalised(t, g) != normalised(t, w) {
					t.Errorf("id %s differs:\nfast: %s\n sdk: %s", id, g, w)
				}
			}
		})
	}
}

// TestStdioFastDrain: the end of the input waits for the calls the fast
// path runs, as for go-sdk's (TestStdioEnd), up to DrainTimeout; one still
// running then is cancelled, its upstream request ended, and nothing is
// written for it once the session has ended.
func TestStdioFastDrain(t *testing.T) {
	api := &slowAPI{started: make(chan string, 1), release: make(chan struct{})}
	ended := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
		if r.Context().Err() != nil {
			close(ended)
		}
	}))
	defer up.Close()
	cfg := &Config{Upstreams: []Upstream{{Name: "things", OpenAPI: "things.json", Document: []byte(testDoc), BaseURL: up.URL}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var answered atomic.Int64
	g.fast.onServe = func() { answered.Add(1) }
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- g.Server().Run(context.Background(), NewStdioTransport(inR, outW,
			&StdioOptions{DrainTimeout: 200 * time.Millisecond, Fast: g.stdioFast()}))
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	io.WriteString(inW, strings.Replace(stdioInit, `"id":1`, `"id":"init"`, 1)+"\n"+stdioInitialized+"\n")
	if !lines.Scan() || !strings.Contains(lines.Text(), `"id":"init","result"`) {
		t.Fatalf("initialize: %q", lines.Text())
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_thing","arguments":{"id":"slow"}}}`+"\n")
	<-api.started
	if answered.Load() != 1 {
		t.Fatal("the fast path did not take the call")
	}
	start := time.Now()
	inW.Close()
	var after []string
	for lines.Scan() {
		after = append(after, lines.Text())
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end after its drain timeout")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("ended after %v, before the 200ms drain timeout", d)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the call still running at the drain timeout was not cancelled")
	}
	if len(after) != 0 {
		t.Errorf("written after the end of the input: %q", after)
	}
}
