package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// loggedPlaybookGateway is a gateway in front of an engine whose demo/slow
// never ends on its own, its log kept.
func loggedPlaybookGateway(t *testing.T, stateful bool) (*Gateway, *engine.Engine, *syncBuffer) {
	t.Helper()
	e := engine.New(&engine.Options{Step: time.Hour})
	logs := &syncBuffer{}
	cfg := &Config{Stateful: stateful, Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
		Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond}}}}
	g, err := New(t.Context(), cfg, &Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, e, logs
}

// TestCancelAtOnceEveryMode: a playbook call cancelled with
// notifications/cancelled has its run cancelled upstream at once — the call's
// log line says upstream_cancel=at_once, not planned (the runner's 2 s linger a
// hang-up gets, left for a re-send) — in a stateful session and over stdio,
// where go-sdk, not the front door, delivers the cancellation, and on the
// NoETL-compatible endpoint, which has no sessions: there only the same
// caller's notification naming the call on the same endpoint cancels it.
func TestCancelAtOnceEveryMode(t *testing.T) {
	for _, mode := range []string{"stateful", "stdio", "noetl"} {
		t.Run(mode, func(t *testing.T) {
			g, e, logs := loggedPlaybookGateway(t, mode == "stateful")

			switch mode {
			case "stateful":
				srv := httptest.NewServer(g.Handler())
				t.Cleanup(srv.Close)
				url := srv.URL + "/mcp"
				id := openSession(t, url, "Bearer alice")
				conn := rawPOST(t, url, call(41, "demo_slow", `{"label":"x"}`), sessionHeader(id, "Bearer alice"), false)
				defer conn.Close()
				waitFor(t, "the run to start", func() bool { return e.Counts().Started == 1 })
				resp, body := post(t, url, cancelled("41"), sessionHeader(id, "Bearer alice"))
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("notifications/cancelled: %d %s", resp.StatusCode, body)
				}
			case "stdio":
				s := startStdio(t, g)
				s.send(t, stdioInit, stdioInitialized)
				s.next(t)
				s.send(t, call(41, "demo_slow", `{"label":"x"}`))
				waitFor(t, "the run to start", func() bool { return e.Counts().Started == 1 })
				s.send(t, cancelled("41"))
			case "noetl":
				srv := httptest.NewServer(g.Handler())
				t.Cleanup(srv.Close)
				url := srv.URL + "/api/mcp/playbook/demo/slow/jsonrpc"
				alice := http.Header{"Authorization": {"Bearer alice"}}
				conn := rawPOSTTo(t, url, call(41, "demo_slow", `{"label":"x"}`), alice)
				defer conn.Close()
				waitFor(t, "the run to start", func() bool { return e.Counts().Started == 1 })
				for _, c := range []struct {
					url, body string
					h         http.Header
				}{
					{url, cancelled("41"), http.Header{"Authorization": {"Bearer bob"}}},      // another caller
					{url, cancelled(`"41"`), alice},                                           // another id
					{srv.URL + "/api/mcp/playbook/demo/fast/jsonrpc", cancelled("41"), alice}, // another endpoint
				} {
					if resp, body := post(t, c.url, c.body, c.h); resp.StatusCode != http.StatusAccepted || body != "" {
						t.Fatalf("notifications/cancelled: %d %q, want 202 and no body", resp.StatusCode, body)
					}
					if n := g.noetlCalls.size(); n != 1 || e.Counts().Cancelled != 0 {
						t.Fatalf("%s to %s by %s cancelled the call (%d in flight, engine %+v)", c.body, c.url, c.h.Get("Authorization"), n, e.Counts())
					}
				}
				if resp, body := post(t, url, cancelled("41"), alice); resp.StatusCode != http.StatusAccepted || body != "" {
					t.Fatalf("notifications/cancelled: %d %q, want 202 and no body", resp.StatusCode, body)
				}
				if got := readAnswer(t, conn); !strings.Contains(got, `"isError":true`) || strings.Contains(got, "unless the same call is re-sent") {
					t.Errorf("the cancelled call's answer: %s", got)
				}
			}
			waitFor(t, "the engine to see the cancel", func() bool { return e.Counts().Cancelled == 1 })
			waitFor(t, "the call's log line", func() bool { return strings.Contains(logs.String(), `msg="playbook call"`) })
			if line := logs.String(); !strings.Contains(line, "upstream_cancel=at_once") {
				t.Errorf("the run was not cancelled at once:\n%s", line)
			}
		})
	}
}

// rawPOSTTo sends body to url on a connection of its own, without reading
// the answer (see readAnswer).
func rawPOSTTo(t *testing.T, url, body string, h http.Header) net.Conn {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", u.Path, u.Host, len(body))
	h.Write(&b)
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestCancelAfterHangUp: a client that hangs up and then sends
// notifications/cancelled (go-sdk's client does both when a call's context
// ends, and the hang-up is often seen first) has the run cancelled at once,
// not after the linger a hang-up alone gets — stateless, stateful and on
// the NoETL endpoint.
func TestCancelAfterHangUp(t *testing.T) {
	for _, mode := range []string{"stateless", "stateful", "noetl"} {
		t.Run(mode, func(t *testing.T) {
			g, e, logs := loggedPlaybookGateway(t, mode == "stateful")
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			url, h := srv.URL+"/mcp", http.Header{"Authorization": {"Bearer alice"}}
			switch mode {
			case "stateful":
				h = sessionHeader(openSession(t, url, "Bearer alice"), "Bearer alice")
			case "noetl":
				url = srv.URL + "/api/mcp/playbook/demo/slow/jsonrpc"
			}
			conn := rawPOSTTo(t, url, call(41, "demo_slow", `{"label":"x"}`), h)
			waitFor(t, "the run to start", func() bool { return e.Counts().Started == 1 })
			conn.Close() // the client hangs up: the run lingers
			waitFor(t, "the call to be left", func() bool { return strings.Contains(logs.String(), `msg="playbook call"`) })
			if resp, body := post(t, url, cancelled("41"), h); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: %d %s", resp.StatusCode, body)
			}
			waitFor(t, "the engine to see the cancel", func() bool { return e.Counts().Cancelled == 1 })
			if !strings.Contains(logs.String(), "the client cancelled the call it had left (no linger)") {
				t.Errorf("the run was cancelled by the linger, not the notification:\n%s", logs.String())
			}
		})
	}
}

// TestInflightLeft: a playbook call whose client went away stays
// cancellable for leftFor by its own caller only, under the caller's digest
// (the Authorization header itself is not kept past the POST); a call that
// ended normally is not kept.
func TestInflightLeft(t *testing.T) {
	in := newInflight()
	req := func(auth string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", auth)
		return r
	}
	peek := rpcPeek{ID: float64(7), Method: "tools/call"}

	post, hangUp := context.WithCancel(context.Background())
	ctx, untrack := in.track(post, req("Bearer alice"), peek)
	notified := cancelledOf(ctx)
	hangUp()
	untrack()
	if len(in.left) != 1 || in.left[0].key != (inflightKey{}) {
		t.Fatalf("left %d calls, the first keeping %+v", len(in.left), in.left)
	}
	if n := in.cancel(req("Bearer bob"), float64(7)); n != 0 || closed(notified) {
		t.Fatalf("another caller's cancellation reached %d calls", n)
	}
	if n := in.cancel(req("Bearer alice"), float64(7)); n != 1 || !closed(notified) {
		t.Fatalf("the caller's cancellation reached %d calls", n)
	}

	ctx, untrack = in.track(context.Background(), req("Bearer carol"), peek)
	cancelledOf(ctx)
	untrack() // answered: nothing to keep
	if len(in.left) != 1 {
		t.Errorf("a call that ended normally was kept: %d left", len(in.left))
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
