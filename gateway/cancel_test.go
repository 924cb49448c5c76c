package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// cancelled is the notification that cancels request id (raw JSON).
func cancelled(id string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"user pressed stop"}}`, id)
}

// sendCancel posts a cancellation and checks go-sdk's answer to a
// notification POST: 202, empty body.
func sendCancel(t *testing.T, url, authorization, id string) {
	t.Helper()
	h := http.Header{}
	if authorization != "" {
		h.Set("Authorization", authorization)
	}
	resp, body := post(t, url, cancelled(id), h)
	if resp.StatusCode != http.StatusAccepted || body != "" {
		t.Fatalf("notifications/cancelled: HTTP %d %q, want 202 and no body", resp.StatusCode, body)
	}
}

// readAnswer reads the HTTP answer of a raw POST.
func readAnswer(t *testing.T, conn net.Conn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the call's answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestStatelessCancel: a REST call waiting on its upstream, cancelled with
// notifications/cancelled in a POST of its own, has its upstream request
// cancelled at once — through the fast path and through go-sdk's handler;
// the same notification from another caller, or naming another id, cancels
// nothing.
func TestStatelessCancel(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast path %v", fast), func(t *testing.T) {
			rec, url := startGatewayWith(t, Config{}, &Options{DisableFastPath: !fast})
			const alice = "Bearer alice"
			conn := rawPOST(t, url, `{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"wait","arguments":{}}}`,
				http.Header{"Authorization": {alice}}, false)
			defer conn.Close()
			waitFor(t, "the call to reach the upstream", func() bool { _, s, _ := rec.counts(); return s == 1 })

			for _, tt := range []struct{ who, authorization, id string }{
				{"another caller", "Bearer mallory", `"call-7"`},
				{"no credential", "", `"call-7"`},
				{"another id", alice, `"call-8"`},
				{"the number 7 is not the string", alice, `7`},
			} {
				sendCancel(t, url, tt.authorization, tt.id)
				select {
				case <-rec.ended:
					t.Fatalf("%s: the call was cancelled", tt.who)
				case <-time.After(200 * time.Millisecond):
				}
			}

			start := time.Now()
			sendCancel(t, url, alice, `"call-7"`)
			select {
			case <-rec.ended:
				t.Logf("upstream request cancelled %v after the notification's answer (2 shared cores: noisy)", time.Since(start).Round(time.Millisecond))
			case <-time.After(10 * time.Second): // a bound on a hang, not a measure: nothing else ends the call
				t.Fatal("the upstream request was not cancelled within 10s of notifications/cancelled")
			}
			if got := readAnswer(t, conn); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, `"id":"call-7"`) {
				t.Errorf("the cancelled call's answer: %s", got)
			}
		})
	}
}

// TestStatelessCancelIDs: ids are matched as go-sdk reads them (a number as
// int64), and two calls of one caller under one id are both cancelled.
func TestStatelessCancelIDs(t *testing.T) {
	rec, url := startGateway(t, Config{})
	h := http.Header{"Authorization": {"Bearer a"}}
	c1 := rawPOST(t, url, call(3, "wait", `{}`), h, false)
	defer c1.Close()
	c2 := rawPOST(t, url, call(3, "wait", `{}`), h, false)
	defer c2.Close()
	waitFor(t, "the calls to reach the upstream", func() bool { _, s, _ := rec.counts(); return s == 2 })
	sendCancel(t, url, "Bearer a", `3.0`)
	for i := range 2 {
		select {
		case <-rec.ended:
		case <-time.After(10 * time.Second): // a bound on a hang: nothing else ends the calls
			t.Fatalf("%d of 2 calls cancelled within 10s", i)
		}
	}
}

// TestStatelessCancelRegistry: the registry holds calls only while their
// POST is served.
func TestStatelessCancelRegistry(t *testing.T) {
	in := newInflight()
	seen := -1
	fd := &frontDoor{maxBody: 1 << 20, calls: &callContexts{}, inflight: in,
		next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = in.size()
			w.WriteHeader(http.StatusAccepted)
		})}
	for _, tt := range []struct {
		body string
		want int
	}{
		{call(1, "wait", `{}`), 1},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"wait"}}`, 0},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"wait"}}`, 0},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0},
		{cancelled("1"), 0},
	} {
		req, _ := http.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		fd.ServeHTTP(httptest.NewRecorder(), req)
		if seen != tt.want || in.size() != 0 {
			t.Errorf("%s: %d registered while served (want %d), %d after", tt.body, seen, tt.want, in.size())
		}
	}
}

// TestStatelessCancelPlaybook: a playbook call (served by go-sdk) cancelled
// with notifications/cancelled is left, and its run cancelled upstream at
// once — not after the 2s linger a hang-up gets.
func TestStatelessCancelPlaybook(t *testing.T) {
	_, e, srv := playbookGateway(t, &engine.Options{Step: time.Hour}, &Playbooks{PollInterval: 100 * time.Millisecond})
	url := srv.URL + "/mcp"
	h := http.Header{"Authorization": {"Bearer alice"}}
	conn := rawPOST(t, url, call(41, "demo_slow", `{"label":"x"}`), h, false)
	defer conn.Close()
	waitFor(t, "the run to start", func() bool { return e.Counts().Started == 1 })

	sendCancel(t, url, "Bearer bob", "41")
	time.Sleep(200 * time.Millisecond)
	if c := e.Counts(); c.Cancelled != 0 {
		t.Fatalf("another caller's cancellation cancelled the run: %+v", c)
	}

	start := time.Now()
	sendCancel(t, url, "Bearer alice", "41")
	waitFor(t, "the engine to see the cancel", func() bool { return e.Counts().Cancelled == 1 })
	t.Logf("run cancelled upstream %v after the notification's answer (2 shared cores: noisy)", time.Since(start).Round(time.Millisecond))
	// At once, not after the 2s linger: told by the answer, which names the
	// linger ("unless the same call is re-sent within 2s") only when the
	// call was left to it — not by a clock a loaded machine slows down.
	got := readAnswer(t, conn)
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "the gateway cancels the run upstream") || strings.Contains(got, "unless the same call is re-sent") {
		t.Errorf("the cancelled call's answer: %s", got)
	}
}
