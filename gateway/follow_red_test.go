package gateway

// Red-team tests of stateful sessions following a reload (follow.go): each
// one is a finding, proven by the test failing before its fix.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// blockingUpstream is a real go-sdk MCP server behind a real HTTP server
// whose tool "block" answers only once release is closed (or its call is
// cancelled), saying on started that a call reached it.
type blockingUpstream struct {
	srv     *httptest.Server
	started chan struct{}
	release chan struct{}
}

func newBlockingUpstream(t *testing.T) *blockingUpstream {
	t.Helper()
	b := &blockingUpstream{started: make(chan struct{}, 16), release: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "blocking", Version: "1"}, nil)
	type in struct {
		Text string `json:"text" jsonschema:"the text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "Answers when the test says so."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			b.started <- struct{}{}
			select {
			case <-b.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + a.Text}}}, nil, nil
		})
	b.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(b.srv.Close)
	return b
}

// redWait waits for c, failing the test after a generous bound.
func redWait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestRedFollowReapServingGateway: a session's call runs on the gateway
// its retired gateway follows. When a second reload re-points the retired
// gateway to the newest one, the gateway that was serving the call is
// retired with no session, no follower and no request counted on it (the
// POST is counted on the session's own gateway), so Replace's reap closed
// it — its MCP upstream client with it, under the call still running.
// Before following, the call would have run on the session's own gateway,
// which is kept while the POST is served.
func TestRedFollowReapServingGateway(t *testing.T) {
	up := newBlockingUpstream(t)
	logger := slog.New(slog.DiscardHandler)
	build := func(prev *Gateway, timeout time.Duration) *Gateway {
		// A different timeout each time: the upstream's entry changed, so
		// each gateway has a client of its own (fedreuse.go).
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL, Timeout: timeout}}}}
		g, err := New(t.Context(), cfg, &Options{Previous: prev, Logger: logger, DisableLogSampling: true})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1 := build(nil, time.Minute)
	f, srv := serveFront(t, g1)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	g2 := build(g1, 2*time.Minute)
	f.Replace(g2) // g1 follows g2
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_block", Arguments: map[string]any{"text": "x"}})
		done <- answer{res, err}
	}()
	redWait(t, up.started, "the call to reach the upstream")

	g3 := build(g2, 3*time.Minute)
	replaced := make(chan struct{})
	go func() {
		f.Replace(g3) // g1 follows g3; g2, which runs the call, is retired
		close(replaced)
	}()
	select {
	case <-replaced:
		close(up.release)
	case <-time.After(10 * time.Second):
		// Replace closed the gateway running the call, and its MCP client's
		// Close waits for the call, under the Front's lock: the reload, and
		// every request to a retired gateway, hang until the call ends.
		t.Errorf("the second reload hangs while a session's call runs on the gateway it retires")
		close(up.release)
		<-replaced
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never answered")
	}
	if a.err != nil || a.res.IsError {
		t.Fatalf("a call in flight on the gateway a session followed, across a second reload: %v %s", a.err, redText(a.res))
	}
	if got := a.res.Content[0].(*mcp.TextContent).Text; got != "done x" {
		t.Errorf("answer %q, want %q", got, "done x")
	}
	// Once the call is over, nothing keeps g2: it is reaped without a
	// request or a reload to prompt it (the session's GET stream keeps g1's
	// own count above zero).
	waitFor(t, "the gateway that served the call to be closed once it ended", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, s := range f.retired {
			if s.g == g2 {
				return false
			}
		}
		return true
	})
}

// redText is a result's text, for a failure's message.
func redText(r *mcp.CallToolResult) string {
	if r == nil {
		return "<nil>"
	}
	out := ""
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out += tc.Text
		}
	}
	return out
}

// TestRedFollowRelistInSwapWindow: followGateway points a retired gateway
// at its successor (succ) and only then, with its lock let go, mirrors. A
// relist of the retired gateway's own MCP upstream landing in between (a
// shared client tells every gateway that uses it) puts the tool in the
// retired gateway's own set but not on its server, since it follows now;
// mirror then took that set for what the server shows, found the tool the
// same on the successor, and never added it: the session could not list
// or call it. The steps are replayed in the order they interleave.
func TestRedFollowRelistInSwapWindow(t *testing.T) {
	build := func() *Gateway {
		_, base := newRecorder(t)
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(frontDoc), BaseURL: base}}}
		g, err := New(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	g1, g2 := build(), build()
	extra := &Tool{Tool: &mcp.Tool{Name: "fs_extra", Description: "Came with a relist.", InputSchema: map[string]any{"type": "object"}}}
	h := func(*Tool) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "extra"}}}, nil
		}
	}
	g2.changeSDKTools([]*Tool{extra}, h, nil) // the successor has it

	// followGateway's first step, then g1's own relist, then the rest.
	g1.pointAt(g2)
	g1.changeSDKTools([]*Tool{extra}, h, nil)
	g1.followGateway(g2)
	g1.mirror()

	ct, st := mcp.NewInMemoryTransports()
	ss, err := g1.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "fs_extra") {
		t.Errorf("the retired gateway's server lists %v: no fs_extra, which the gateway it follows has", names)
	}
}

// TestRedFollowReloadStorm: one session lives through many reloads while
// it calls a tool without pause and the current gateway relists its MCP
// upstream (whose description keeps changing) at the same time as each
// Replace. Run with -race: the following's locks (Front.mu, each
// gateway's follow.mu, go-sdk's server lock, sdkToolSet's) are taken in
// every order these paths take them. No call fails, nothing deadlocks, the
// retired gateways do not pile up (the session's own, and at most the
// ones reaped later), and the session ends listing the last description.
func TestRedFollowReloadStorm(t *testing.T) {
	up := newFedUpstream(t)
	logger := slog.New(slog.DiscardHandler)
	build := func(prev *Gateway) *Gateway {
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL}}}}
		g, err := New(t.Context(), cfg, &Options{Previous: prev, Logger: logger, DisableLogSampling: true})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := build(nil)
	f, srv := serveFront(t, g)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	stop := make(chan struct{})
	calls := make(chan error, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				if n == 0 {
					calls <- errors.New("no call was made")
					return
				}
				calls <- nil
				return
			default:
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs_echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || res.IsError {
				calls <- fmt.Errorf("call %d: %v %s", n, err, redText(res))
				return
			}
			n++
		}
	}()
	const reloads = 12
	for i := range reloads {
		up.desc.Store(fmt.Sprintf("Echoes its text (%d).", i))
		next := build(f.Current())
		var wg sync.WaitGroup
		cur := f.Current()
		wg.Go(func() { cur.relist("fs") })
		wg.Go(func() { next.relist("fs") })
		wg.Go(func() { f.Replace(next) })
		wg.Wait()
	}
	close(stop)
	if err := <-calls; err != nil {
		t.Fatalf("a call across the reloads: %v", err)
	}
	// The last relist of the current gateway may have read the upstream
	// before its description's last change: read it once more.
	f.Current().relist("fs")
	want := fmt.Sprintf("Echoes its text (%d).", reloads-1)
	waitFor(t, "the session to list the last description", func() bool {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			return false
		}
		for _, tl := range res.Tools {
			if tl.Name == "fs_echo" {
				return tl.Description == want
			}
		}
		return false
	})
	waitFor(t, "the retired gateways to come down to the session's own", func() bool { return f.Retired() == 1 })
	cur := f.Current()
	cur.follow.mu.Lock()
	n := len(cur.follow.followers)
	cur.follow.mu.Unlock()
	if n != 1 {
		t.Errorf("the current gateway has %d followers, want 1", n)
	}
}

// TestRedFollowAuth: a session begun before a reload is checked against
// the new gateway's state after it, on both paths a call takes (the
// session fast path and go-sdk's handler): step-up requirements that
// came or went with the document (the auth section itself unchanged),
// auth.list: callable's view, a tool removed, and another subject holding
// the session's id.
func TestRedFollowAuth(t *testing.T) {
	is := newAuthIssuer(t)
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	open := strings.Replace(authDoc, `"security": [{"oa": ["things:read"]}],`, ``, 1) // list_things needs no scope
	gone := strings.Replace(authDoc, `"operationId": "list_things"`, `"operationId": "list_things2"`, 1)
	if open == authDoc || gone == authDoc {
		t.Fatal("the document edits did not apply")
	}
	listThings := toolCall("list_things", "{}")
	const listTools = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, fast := range []bool{true, false} {
		for _, tt := range []struct {
			name          string
			before, after string
			wantBefore    int  // the call's status before the reload
			wantCall      int  // the call's status after the reload
			wantReach     bool // and it reached the upstream
			wantListed    bool // list_things in the session's tools/list
		}{
			{"scope required by the new document", open, authDoc, http.StatusOK, http.StatusForbidden, false, false},
			{"scope no longer required", authDoc, open, http.StatusForbidden, http.StatusOK, true, true},
			{"tool removed", open, gone, http.StatusOK, http.StatusOK, false, false}, // go-sdk's error answer, in 200
		} {
			t.Run(fmt.Sprintf("fast=%v/%s", fast, tt.name), func(t *testing.T) {
				build := func(doc string, prev *Gateway) *Gateway {
					cfg := &Config{Stateful: true,
						Auth:      &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"}, List: auth.ListCallable},
						Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(doc), BaseURL: api.URL}}}
					g, err := New(t.Context(), cfg, &Options{Previous: prev, DisableFastPath: !fast})
					if err != nil {
						t.Fatal(err)
					}
					return g
				}
				g1 := build(tt.before, nil)
				f, srv := serveFront(t, g1)
				url := srv.URL + "/mcp"
				bearer := "Bearer " + is.tokenFor(t, "alice", "mcp") // no things:read
				id := openSession(t, url, bearer)
				if resp, body := post(t, url, listThings, sessionHeader(id, bearer)); resp.StatusCode != tt.wantBefore {
					t.Fatalf("list_things before the reload: %d %s, want %d", resp.StatusCode, body, tt.wantBefore)
				}

				f.Replace(build(tt.after, g1))
				if f.Retired() != 1 {
					t.Fatalf("the session's gateway is not kept: %d retired", f.Retired())
				}
				n := len(rec.all())
				resp, body := post(t, url, listThings, sessionHeader(id, bearer))
				if resp.StatusCode != tt.wantCall {
					t.Errorf("list_things after the reload: %d %s, want %d", resp.StatusCode, body, tt.wantCall)
				}
				if reached := len(rec.all()) > n; reached != tt.wantReach {
					t.Errorf("list_things reached the upstream: %v, want %v (%s)", reached, tt.wantReach, body)
				}
				_, body = post(t, url, listTools, sessionHeader(id, bearer))
				if listed := strings.Contains(body, `"list_things"`); listed != tt.wantListed {
					t.Errorf("list_things listed: %v, want %v: %s", listed, tt.wantListed, body)
				}

				// Another subject with the session's id: not its session.
				mallory := "Bearer " + is.tokenFor(t, "mallory", "mcp things:read")
				n = len(rec.all())
				if resp, body := post(t, url, listThings, sessionHeader(id, mallory)); resp.StatusCode != http.StatusNotFound {
					t.Errorf("another subject's call on the session: %d %s, want 404", resp.StatusCode, body)
				}
				if len(rec.all()) > n {
					t.Error("another subject's call reached the upstream")
				}
			})
		}
	}
}

// all is every request's credential headers so far.
func (c *credRecorder) all() []http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// TestRedFollowInitializeAcrossSwap: an initialize that reached the old
// gateway before a reload's swap and makes its session after Replace ran
// (here its body is still on the way) leaves a session on the retired
// gateway that Replace did not see (it had none then), so it did not
// follow: the session was served the old catalog, a tool the reload
// removed included, until the next reload.
func TestRedFollowInitializeAcrossSwap(t *testing.T) {
	build := func(doc string, prev *Gateway) (*recorder, *Gateway) {
		rec, base := newRecorder(t)
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(doc), BaseURL: base, Timeout: time.Minute}}}
		g, err := New(t.Context(), cfg, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return rec, g
	}
	rec1, g1 := build(frontDoc, nil)
	f, srv := serveFront(t, g1)
	url := srv.URL + "/mcp"

	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, url, pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp
	}()
	half := len(initialize) / 2
	io.WriteString(pw, initialize[:half])
	served := f.cur.Load()
	waitFor(t, "the initialize to be served on the first gateway", func() bool { return served.active.Load() == 1 })

	_, g2 := build(followDoc, g1) // nap is gone, nap2 came
	f.Replace(g2)
	io.WriteString(pw, initialize[half:])
	pw.Close()
	resp := <-answered
	if resp == nil {
		return
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, id)
	}
	h := sessionHeader(id, "")
	if resp, body := post(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	_, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, h)
	if !strings.Contains(body, `"nap2"`) || strings.Contains(body, `"nap"`) {
		t.Errorf("a session made across the swap lists the old catalog: %s", body)
	}
	before, _, _ := rec1.counts()
	post(t, url, toolCall("nap", `{}`), h)
	if n, _, _ := rec1.counts(); n != before {
		t.Errorf("a tool the reload removed was called on the old gateway's upstream")
	}
}

// TestRedFollowCancel: notifications/cancelled of a call that a session
// begun before a reload makes after it — the call served by the new
// gateway, through the session fast path or go-sdk's handler — reaches
// the new gateway's upstream request; so does the client hanging up.
func TestRedFollowCancel(t *testing.T) {
	for _, fast := range []bool{true, false} {
		for _, how := range []string{"notifications/cancelled", "hang-up"} {
			t.Run(fmt.Sprintf("fast=%v/%s", fast, how), func(t *testing.T) {
				build := func(doc string, prev *Gateway) (*recorder, *Gateway) {
					rec, base := newRecorder(t)
					cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(doc), BaseURL: base, Timeout: time.Minute}}}
					g, err := New(t.Context(), cfg, &Options{Previous: prev, DisableFastPath: !fast})
					if err != nil {
						t.Fatal(err)
					}
					return rec, g
				}
				_, g1 := build(frontDoc, nil)
				f, srv := serveFront(t, g1)
				rec2, g2 := build(followDoc, g1)
				var id string
				var callDone chan struct{}
				switch how {
				case "notifications/cancelled":
					cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
						Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { cs.Close() })
					f.Replace(g2)
					ctx, cancel := context.WithCancel(t.Context())
					callDone = make(chan struct{})
					go func() {
						defer close(callDone)
						cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}})
					}()
					waitFor(t, "the call to reach the new gateway's upstream", func() bool { _, s, _ := rec2.counts(); return s == 1 })
					cancel() // go-sdk's client sends notifications/cancelled
				case "hang-up":
					id = openSession(t, srv.URL+"/mcp", "")
					f.Replace(g2)
					ctx, cancel := context.WithCancel(t.Context())
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader(toolCall("wait", "{}")))
					req.Header = sessionHeader(id, "")
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					callDone = make(chan struct{})
					go func() {
						defer close(callDone)
						if resp, err := http.DefaultClient.Do(req); err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					}()
					waitFor(t, "the call to reach the new gateway's upstream", func() bool { _, s, _ := rec2.counts(); return s == 1 })
					cancel()
				}
				select {
				case <-rec2.ended:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream request of a cancelled call served by the new gateway goes on")
				}
				<-callDone
			})
		}
	}
}

// TestRedFollowTasks: MCP tasks on a session begun before a reload — one
// made before it, one made after it (on the new gateway's task door) —
// are read (tasks/get), cancelled (tasks/cancel) and told of
// (notifications/tasks/status on the session's GET stream, which the
// session's own gateway holds) as on a session of the current gateway.
func TestRedFollowTasks(t *testing.T) {
	e := engine.New(&engine.Options{Step: 100 * time.Millisecond})
	api := httptest.NewServer(http.HandlerFunc(fastAPI))
	t.Cleanup(api.Close)
	build := func(prev *Gateway) *Gateway {
		cfg := &Config{Stateful: true, Upstreams: []Upstream{
			{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
				Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond, Timeout: time.Minute}},
			{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: api.URL},
		}}
		g, err := New(t.Context(), cfg, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1 := build(nil)
	f, srv := serveFront(t, g1)
	te := &taskEnv{g: g1, e: e, url: srv.URL + "/mcp"}
	const carol = "Bearer carol"
	sid := openSession(t, te.url, carol)
	stream := openStream(t, te.url, sid, carol)
	waitFor(t, "the stream registered", func() bool {
		g1.streams.mu.Lock()
		defer g1.streams.mu.Unlock()
		return g1.streams.m[sid] != nil
	})
	h := sessionHeader(sid, carol)
	create := func(label string) string {
		t.Helper()
		res, rerr := te.send(t, carol, "tools/call", fmt.Sprintf(`{"name":"demo_slow","arguments":{"label":%q},"task":{}}`, label), h)
		if rerr != nil {
			t.Fatal(rerr)
		}
		return res["task"].(map[string]any)["taskId"].(string)
	}
	before := create("before")
	f.Replace(build(g1))
	after := create("after")
	for _, id := range []string{before, after} {
		if task, rerr := te.send(t, carol, "tasks/get", taskIDParams(id), h); rerr != nil || task["status"] != "working" {
			t.Errorf("tasks/get after the reload: %v %v", task, rerr)
		}
	}
	if _, rerr := te.send(t, carol, "tasks/cancel", taskIDParams(after), h); rerr != nil {
		t.Fatalf("tasks/cancel of the task made after the reload: %v", rerr)
	}
	want := map[string]string{before: "completed", after: "cancelled"}
	for range 2 {
		n := nextMessage(t, stream, 30*time.Second)
		p, _ := n["params"].(map[string]any)
		id, _ := p["taskId"].(string)
		if n["method"] != "notifications/tasks/status" || want[id] == "" || p["status"] != want[id] {
			t.Fatalf("on the session's stream: %v (want %v)", n, want)
		}
		delete(want, id)
	}
	res, rerr := te.send(t, carol, "tasks/result", taskIDParams(before), h)
	if rerr != nil || !strings.Contains(text0(res), "counted 5 steps") {
		t.Errorf("tasks/result of the task made before the reload: %v %v", res, rerr)
	}
}

// TestRedFollowMirrorOffFrontLock: Replace mirrored each retired
// gateway's server (2 JSON encodings a tool to compare, and go-sdk's
// AddTool for what changed) under the Front's lock, which every request
// carrying an Mcp-Session-Id takes while a retired gateway is kept
// (Front.owner) — the current gateway's sessions' too. With Stripe's 417
// tools that was 0.1–0.9 s per reload on this machine during which every
// stateful session stalled. Here the mirror is held up the way a
// retired gateway's go-sdk tools still registering hold it (sdkTools
// open: it started from a snapshot moments ago), and a session of the new
// gateway must still be served meanwhile.
func TestRedFollowMirrorOffFrontLock(t *testing.T) {
	build := func(doc string, prev *Gateway) *Gateway {
		_, base := newRecorder(t)
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(doc), BaseURL: base, Timeout: time.Minute}}}
		g, err := New(t.Context(), cfg, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1 := build(frontDoc, nil)
	f, srv := serveFront(t, g1)
	url := srv.URL + "/mcp"
	old := openSession(t, url, "")

	g2 := build(followDoc, g1)
	registered := g1.sdkTools
	held := make(chan struct{})
	g1.sdkTools = held // its tools "still registering" (started from a snapshot): mirror waits
	replaced := make(chan struct{})
	go func() {
		f.Replace(g2)
		close(replaced)
	}()
	waitFor(t, "the new gateway to be served", func() bool { return f.Current() == g2 })

	listed := make(chan string, 1)
	go func() {
		id := openSession(t, url, "") // on g2: no session id yet
		_, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sessionHeader(id, ""))
		listed <- body
	}()
	select {
	case body := <-listed:
		if !strings.Contains(body, `"nap2"`) {
			t.Errorf("the new gateway's session lists %s", body)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("a session of the new gateway waits for the retired gateways' mirror (the Front's lock)")
	}
	<-registered
	close(held)
	<-replaced
	_, body := post(t, url, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, sessionHeader(old, ""))
	if !strings.Contains(body, `"nap2"`) {
		t.Errorf("the old session, once mirrored, lists %s", body)
	}
}

// TestRedFollowPlaybookProgress: a playbook call on a session begun before
// a reload, run by the new gateway's runner, sends its progress to the
// session (notifications/progress), on both call paths, and a
// notifications/cancelled of it cancels the run at the engine.
func TestRedFollowPlaybookProgress(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			e := engine.New(&engine.Options{Step: 100 * time.Millisecond})
			build := func(prev *Gateway) *Gateway {
				cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
					Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond, Timeout: time.Minute}}}}
				g, err := New(t.Context(), cfg, &Options{Previous: prev, DisableFastPath: !fast})
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			g1 := build(nil)
			f, srv := serveFront(t, g1)
			var mu sync.Mutex
			var progress []string
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, r.Params.Message)
					mu.Unlock()
				},
			})
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			f.Replace(build(g1))

			params := &mcp.CallToolParams{Name: "demo_slow", Arguments: map[string]any{"label": "x"}}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(t.Context(), params)
			if err != nil || res.IsError || redText(res) != "x: counted 5 steps" {
				t.Fatalf("a playbook call after the reload: %v %s", err, redText(res))
			}
			waitFor(t, "progress on the session", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(progress) >= 3
			})

			cancelled := e.Counts().Cancelled
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_slow", Arguments: map[string]any{"label": "y"}})
			}()
			waitFor(t, "the second run to start", func() bool { return e.Counts().Started >= 2 })
			cancel()
			<-done
			waitFor(t, "the engine to see the run cancelled", func() bool { return e.Counts().Cancelled > cancelled })
		})
	}
}

// TestRedFollowAlternatingReloads: reloads that alternate between a
// configuration the session can follow and one it cannot (search mode)
// keep at most the session's own gateway and the one it follows, however
// many there are; the session ends on the last catalog it could follow.
func TestRedFollowAlternatingReloads(t *testing.T) {
	build := func(doc, mode string, prev *Gateway) *Gateway {
		_, base := newRecorder(t)
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(doc), BaseURL: base, Timeout: time.Minute}}}
		cfg.Catalog.Mode = mode
		g, err := New(t.Context(), cfg, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1 := build(frontDoc, "", nil)
	f, srv := serveFront(t, g1)
	url := srv.URL + "/mcp"
	id := openSession(t, url, "")
	for i := range 10 {
		doc, mode := frontDoc, "search"
		if i%2 == 1 {
			doc, mode = followDoc, ""
			if i%4 == 3 {
				doc = frontDoc
			}
		}
		f.Replace(build(doc, mode, f.Current()))
		if n := f.Retired(); n > 2 {
			t.Fatalf("after reload %d: %d retired gateways kept, want at most 2 (the session's and the one it follows)", i, n)
		}
	}
	// The last reload it could follow (i = 9) served followDoc.
	_, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sessionHeader(id, ""))
	if !strings.Contains(body, `"nap2"`) || strings.Contains(body, `"nap"`) {
		t.Errorf("the session lists %s", body)
	}
}

// TestRedFollowTaskList: tasks/list on a session begun before a reload
// lists the tasks that session made before it. Its tasks/list is the new
// gateway's task door's now (follow.go), and with state: memory each
// gateway kept its own task records, so the session's own earlier tasks
// were gone from its list (tasks/get still read them: their ids are
// sealed with the process's key) — where before following, the old
// gateway's door answered with the old records.
func TestRedFollowTaskList(t *testing.T) {
	e := engine.New(&engine.Options{Step: 20 * time.Millisecond})
	build := func(prev *Gateway) *Gateway {
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
			Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond, Timeout: time.Minute}}}}
		g, err := New(t.Context(), cfg, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1 := build(nil)
	f, srv := serveFront(t, g1)
	te := &taskEnv{g: g1, e: e, url: srv.URL + "/mcp"}
	const carol = "Bearer carol"
	sid := openSession(t, te.url, carol)
	h := sessionHeader(sid, carol)
	res, rerr := te.send(t, carol, "tools/call", `{"name":"demo_fast","arguments":{},"task":{}}`, h)
	if rerr != nil {
		t.Fatal(rerr)
	}
	id := res["task"].(map[string]any)["taskId"].(string)
	listed := func() bool {
		t.Helper()
		res, rerr := te.send(t, carol, "tasks/list", `{}`, h)
		if rerr != nil {
			t.Fatalf("tasks/list: %v", rerr)
		}
		tasks, _ := res["tasks"].([]any)
		for _, tk := range tasks {
			if tk.(map[string]any)["taskId"] == id {
				return true
			}
		}
		return false
	}
	if !listed() {
		t.Fatal("tasks/list before the reload does not list the task")
	}
	f.Replace(build(g1))
	if !listed() {
		t.Error("tasks/list on the same session after the reload does not list the task it made before")
	}
}
