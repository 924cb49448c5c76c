package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway/stdio"
)

// The lines a stdio client sends to start a session.
const (
	stdioInit        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	stdioInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// stdioAnswer is one line the gateway wrote.
type stdioAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	line string
}

// String is the line as written, for failure messages.
func (a stdioAnswer) String() string { return a.line }

func (a stdioAnswer) code() int64 {
	if a.Error == nil {
		return 0
	}
	return a.Error.Code
}

// stdioSession is a gateway serving stdio over two pipes.
type stdioSession struct {
	in      *io.PipeWriter
	answers chan stdioAnswer // closed once ServeStdio returned and its output is read
	done    chan error       // ServeStdio's result
}

// startStdio runs g.ServeStdio on pipes, reading every line it writes.
func startStdio(t *testing.T, g *Gateway) *stdioSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdioSession{in: inW, answers: make(chan stdioAnswer, 100), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		inW.Close()
	})
	go func() {
		err := g.ServeStdio(ctx, inR, outW)
		outW.Close()
		s.done <- err
	}()
	go func() {
		defer close(s.answers)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var a stdioAnswer
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Errorf("the gateway wrote a line that is not JSON: %v: %.200s", err, sc.Text())
				continue
			}
			a.line = sc.Text()
			s.answers <- a
		}
	}()
	return s
}

func (s *stdioSession) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.in, l+"\n"); err != nil {
			t.Fatalf("writing to the gateway: %v", err)
		}
	}
}

// next returns the next answer, failing after 10 s.
func (s *stdioSession) next(t *testing.T) stdioAnswer {
	t.Helper()
	select {
	case a, ok := <-s.answers:
		if !ok {
			t.Fatal("the gateway ended without answering")
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
	}
	return stdioAnswer{}
}

// end waits for ServeStdio to return, and returns what it wrote meanwhile.
func (s *stdioSession) end(t *testing.T) ([]stdioAnswer, error) {
	t.Helper()
	var got []stdioAnswer
	timeout := time.After(10 * time.Second)
	for {
		select {
		case a, ok := <-s.answers:
			if !ok {
				return got, <-s.done
			}
			got = append(got, a)
		case <-timeout:
			t.Fatalf("the gateway did not end within 10s; answers so far: %v", got)
		}
	}
}

func newThingsGateway(t *testing.T, api http.Handler) *Gateway {
	t.Helper()
	cfg := &Config{Upstreams: []Upstream{{Name: "things", OpenAPI: "things.json", Document: []byte(testDoc), Handler: api}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStdioLines sends raw lines, ends the input, and checks every answer:
// a bad line is answered and the session goes on, no error has code 0, and
// every call read before the end of the input is answered.
func TestStdioLines(t *testing.T) {
	type want struct {
		id   string // the answer's id, as JSON
		code int64  // 0: a result
		has  string // in the error's message and data
	}
	ok := func(id string) want { return want{id: id} }
	padded := func(id, n int) string { // a ping of exactly n bytes
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"`, id)
		return head + strings.Repeat(" ", n-len(head)-1) + "}"
	}
	tests := []struct {
		name  string
		lines []string
		want  []want
	}{
		{
			name: "malformed lines, then requests",
			lines: []string{
				stdioInit, stdioInitialized,
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"`,
				`not json`,
				`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_thing","arguments":{"id":"7"}}}`,
			},
			want: []want{
				ok("1"),
				{"null", -32700, `"line":3,"offset":`},
				{"null", -32700, `"line":4,"offset":2,"error":"invalid character 'o' in literal null`},
				ok("3"), ok("4"),
			},
		},
		{
			name: "JSON that is not a JSON-RPC message",
			lines: []string{
				stdioInit,
				`{"foo":1}`,
				`42`,
				`"ping"`,
				`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`,
				`{"id":5,"method":"ping"}`,
				`{"jsonrpc":"1.0","id":"six","method":"ping"}`,
				`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
				`{"jsonrpc":"2.0","id":7,"method":7}`,
				`{"jsonrpc":"2.0"}`,
				``, `   `, "\t",
				`{"jsonrpc":"2.0","id":8,"method":"ping"}` + "\r",
			},
			want: []want{
				ok("1"),
				{"null", -32600, `missing \"jsonrpc\": \"2.0\"`},
				{"null", -32600, "a JSON object, not a number"},
				{"null", -32600, "a JSON object, not a string"},
				{"null", -32600, "batch"},
				{"5", -32600, `missing \"jsonrpc\"`},
				{`"six"`, -32600, `\"jsonrpc\" is \"1.0\"`},
				{"null", -32600, `\"id\" is a boolean`},
				{"7", -32600, `\"method\" is a number`},
				{"null", -32600, `neither \"method\"`},
				ok("8"),
			},
		},
		{
			name: "calls before initialize",
			lines: []string{
				`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":"early2","method":"tools/call","params":{"name":"get_thing","arguments":{"id":"1"}}}`,
				`{"jsonrpc":"2.0","id":"p","method":"ping"}`,
				stdioInit, stdioInitialized,
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
				strings.Replace(stdioInit, `"id":1`, `"id":9`, 1),
			},
			want: []want{
				{`"early"`, -32600, "send an initialize request first"},
				{`"early2"`, -32600, "send an initialize request first"},
				ok(`"p"`), ok("1"), ok("2"),
				{"9", -32600, `duplicate \"initialize\"`}, // go-sdk says code 0
			},
		},
		{
			name: "initialize with params go-sdk cannot decode, then a good one",
			lines: []string{
				`{"jsonrpc":"2.0","id":"i0","method":"initialize","params":0}`,
				`{"jsonrpc":"2.0","id":"i1","method":"initialize","params":{"protocolVersion":5}}`,
				`{"jsonrpc":"2.0","id":"i2","method":"initialize"}`,
				stdioInit, stdioInitialized,
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			},
			want: []want{
				{`"i0"`, -32602, "handling 'initialize': invalid params: "}, // go-sdk says code 0
				{`"i1"`, -32602, "handling 'initialize': invalid params: "},
				{`"i2"`, -32602, `missing required \"params\"`},
				ok("1"), ok("2"),
			},
		},
		{
			name: "initialize and a call, then the end of the input",
			lines: []string{
				stdioInit, stdioInitialized,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_thing","arguments":{"name":"n"}}}`,
			},
			want: []want{ok("1"), ok("2")},
		},
		{
			name: "a line over the limit is skipped; one at the limit is served",
			lines: []string{
				stdioInit,
				padded(2, DefaultMaxLineBytes+1),
				padded(3, DefaultMaxLineBytes),
				`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
			},
			want: []want{
				ok("1"),
				{"null", -32600, "line 2 is longer than the limit of 4194304 bytes (4 MiB)"},
				ok("3"), ok("4"),
			},
		},
		{
			name:  "a last line without a newline",
			lines: []string{stdioInit + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n" + `{"jsonrpc"`},
			want:  []want{ok("1"), ok("2"), {"null", -32700, `"line":3`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newThingsGateway(t, &upstreamLog{})
			s := startStdio(t, g)
			// The last line of one case has no newline: send it raw.
			for i, l := range tt.lines {
				if i == len(tt.lines)-1 && strings.HasSuffix(l, `{"jsonrpc"`) {
					io.WriteString(s.in, l)
					continue
				}
				s.send(t, l)
			}
			s.in.Close()
			got, err := s.end(t)
			if err != nil {
				t.Errorf("ServeStdio = %v, want nil at the end of the input", err)
			}
			// Answers may come in any order; match each wanted answer to the
			// first unmatched one with its id and code.
			used := make([]bool, len(got))
		next:
			for _, w := range tt.want {
				for i, a := range got {
					if used[i] || string(a.ID) != w.id || a.code() != w.code {
						continue
					}
					if w.code != 0 && !strings.Contains(a.line, w.has) {
						continue
					}
					used[i] = true
					continue next
				}
				t.Errorf("no answer with id %s, code %d, containing %q", w.id, w.code, w.has)
			}
			for i, a := range got {
				if a.Error != nil && a.Error.Code == 0 {
					t.Errorf("an error with code 0: %s", a.line)
				}
				if !used[i] {
					t.Errorf("unexpected answer: %.300s", a.line)
				}
			}
		})
	}
}

// slowAPI is an upstream whose calls wait for release, so that the input
// can end (or a shutdown come) while a call is in flight.
type slowAPI struct {
	started chan string
	release chan struct{}
	calls   atomic.Int32
}

func (a *slowAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	a.started <- r.URL.Path
	select {
	case <-a.release:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":%q}`, strings.TrimPrefix(r.URL.Path, "/things/"))
}

// TestStdioEnd checks both ways a stdio session ends — stdin closed and a
// shutdown request — with a call still in flight: the call is answered
// before ServeStdio returns nil, and a shutdown is answered with a null
// result at once, even though stdin stays open.
func TestStdioEnd(t *testing.T) {
	for _, how := range []string{"eof", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			api := &slowAPI{started: make(chan string, 1), release: make(chan struct{})}
			s := startStdio(t, newThingsGateway(t, api))
			s.send(t, stdioInit, stdioInitialized)
			if a := s.next(t); string(a.ID) != "1" || a.Error != nil {
				t.Fatalf("initialize: %s", a.line)
			}
			s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_thing","arguments":{"id":"slow"}}}`)
			<-api.started
			// A second call with the id in flight is refused, not run.
			s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_thing","arguments":{"id":"dup"}}}`)
			if a := s.next(t); a.code() != -32600 || string(a.ID) != "null" || !strings.Contains(a.Error.Message, "id 2 is already in use") {
				t.Errorf("a duplicate id: %s", a.line)
			}
			if how == "eof" {
				s.in.Close()
			} else {
				s.send(t, `{"jsonrpc":"2.0","id":"bye","method":"shutdown"}`)
				a := s.next(t)
				if a.line != `{"jsonrpc":"2.0","id":"bye","result":null}` {
					t.Errorf("shutdown answered %s", a.line)
				}
			}
			select {
			case err := <-s.done:
				t.Fatalf("ServeStdio returned (%v) with a call in flight", err)
			case <-time.After(100 * time.Millisecond):
			}
			close(api.release)
			got, err := s.end(t)
			if err != nil {
				t.Errorf("ServeStdio = %v, want nil", err)
			}
			if len(got) != 1 || string(got[0].ID) != "2" || got[0].Error != nil || !strings.Contains(string(got[0].Result), `slow`) {
				t.Errorf("answers after the end: %v, want the call's result", got)
			}
			if n := api.calls.Load(); n != 1 {
				t.Errorf("%d upstream calls, want 1", n)
			}
		})
	}
}

// TestStdioDrainTimeout checks the bound on the wait: a call still running
// when DrainTimeout passes is cancelled, and the session ends.
func TestStdioDrainTimeout(t *testing.T) {
	api := &slowAPI{started: make(chan string, 1), release: make(chan struct{})}
	g := newThingsGateway(t, api)
	inR, inW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- g.Server().Run(context.Background(), NewStdioTransport(inR, io.Discard, &StdioOptions{DrainTimeout: 200 * time.Millisecond}))
	}()
	io.WriteString(inW, stdioInit+"\n"+stdioInitialized+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_thing","arguments":{"id":"slow"}}}`+"\n")
	<-api.started
	start := time.Now()
	inW.Close()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("Run = %v", err)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
			t.Errorf("ended after %v, want the 200ms drain timeout", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end after its drain timeout")
	}
}

// The stdio package cannot import gateway: its drain default restates
// DefaultTimeout, and this keeps the two in step.
func TestStdioDrainDefault(t *testing.T) {
	if stdio.DefaultDrainTimeout != DefaultTimeout+5*time.Second {
		t.Errorf("stdio.DefaultDrainTimeout %s, want DefaultTimeout (%s) plus 5s", stdio.DefaultDrainTimeout, DefaultTimeout)
	}
}
