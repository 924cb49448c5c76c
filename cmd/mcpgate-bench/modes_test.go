package main

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"testing"
	"time"
)

// TestBenchModes runs issue 25's rows briefly (two rounds): the stateful, stdio,
// playbook and noetl targets beside the baseline and mcpgate, every call
// answered with its own answer, each target line printed with its verdict,
// and the idle-session RSS measured (measureSessions fails unless the idle
// sessions still answer a ping afterwards).
func TestBenchModes(t *testing.T) {
	benchRun(t, []string{"-targets", "baseline,mcpgate,stateful,stdio,playbook,noetl", "-c", "8", "-duration", "1s", "-warmup", "200ms", "-sessions", "200", "-sessions-idle", "1s", "-rounds", "2"}, 12,
		[]string{"baseline", "mcpgate", "stateful", "stdio", "playbook", "noetl"}, []string{
			`(?m)^ratio stateful/baseline req/s c=8: \d+\.\d\d \(target ≥ 0\.7: (met|MISSED)\)$`,
			`(?m)^stateful alloc KB/call c=8: \d+\.\d\d \(target ≤ 30: (met|MISSED)\)$`,
			`(?m)^ratio stdio/mcpgate req/s c=8: \d+\.\d\d \(target ≥ 0\.8: (met|MISSED)\)$`,
			`(?m)^ratio playbook/noetl mcpgate CPU per call c=8: \d+\.\d\d \(target ≤ 1\.2: (met|MISSED)\) \(/mcp \d+ µs, NoETL endpoint \d+ µs\)$`,
			`(?m)^over 2 rounds, ratio stdio/mcpgate req/s c=8: median \d+\.\d\d, range \d+\.\d\d-\d+\.\d\d \(\d+\.\d\d \d+\.\d\d\); target ≥ 0\.8: (met|MISSED)$`,
			`(?m)^idle stateful sessions: 200 opened in `,
			`(?m)^RSS per idle stateful session at 200 sessions: -?\d+\.\d KB \(target ≤ 10: (met|MISSED); Go heap\+stacks -?\d+\.\d KB, goroutines \d+\.\d\d per session\)$`,
		})
}

// TestCheckPlaybook: the greeting of the call's own name is right, another
// call's is a wrong-client answer, anything else an error.
func TestCheckPlaybook(t *testing.T) {
	tests := []struct {
		name, body string
		want       outcomeKind
	}{
		{"own", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Hello, w1-7!"}]}}`, outOK},
		{"another call's", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Hello, w2-7!"}]}}`, outWrong},
		{"another id", `{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"Hello, w1-7!"}]}}`, outWrong},
		{"isError", `{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"text","text":"the engine is busy"}]}}`, outError},
		{"JSON-RPC error", `{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"busy"}}`, outError},
		{"no content", `{"jsonrpc":"2.0","id":7,"result":{}}`, outError},
		{"other text", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Goodbye"}]}}`, outError},
		{"not JSON", `nope`, outError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkPlaybook("application/json", []byte(tt.body), 7, "w1-7"); got.kind != tt.want {
				t.Errorf("kind %d (%s), want %d", got.kind, got.msg, tt.want)
			}
		})
	}
}

// TestStdioClientRoutesByID: answers that come back out of order, with
// notifications between them, each reach the call with their id; when the
// child's stdout ends, a waiting call fails rather than hangs.
func TestStdioClientRoutesByID(t *testing.T) {
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	c := &stdioClient{proc: &proc{cmd: &exec.Cmd{}}, in: inW, pending: map[int64]chan []byte{}}
	go c.read(outR)
	// The "server": reads two requests, answers the second first.
	go func() {
		buf := make([]byte, 4096)
		var got []byte
		for bytes.Count(got, []byte("\n")) < 2 {
			n, err := inR.Read(buf)
			if err != nil {
				return
			}
			got = append(got, buf[:n]...)
		}
		io.WriteString(outW, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n")
		io.WriteString(outW, `{"jsonrpc":"2.0","id":4294967298,"result":{"n":2}}`+"\n")
		io.WriteString(outW, `{"jsonrpc":"2.0","id":4294967297,"result":{"n":1}}`+"\n")
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	type res struct {
		b   []byte
		err error
	}
	a, b := make(chan res, 1), make(chan res, 1)
	go func() { r, err := c.roundTrip(ctx, stdioIDBase(1), []byte(`{"id":4294967297}`)); a <- res{r, err} }()
	go func() { r, err := c.roundTrip(ctx, stdioIDBase(1)+1, []byte(`{"id":4294967298}`)); b <- res{r, err} }()
	for _, x := range []struct {
		ch   chan res
		want string
	}{{a, `"n":1`}, {b, `"n":2`}} {
		r := <-x.ch
		if r.err != nil || !bytes.Contains(r.b, []byte(x.want)) {
			t.Errorf("answer %q (%v), want one with %s", r.b, r.err, x.want)
		}
	}
	waiting := make(chan error, 1)
	go func() { _, err := c.roundTrip(ctx, 99, []byte(`{"id":99}`)); waiting <- err }()
	go io.Copy(io.Discard, inR)
	outW.Close()
	if err := <-waiting; err == nil || ctx.Err() != nil {
		t.Errorf("a call pending when stdout ended: %v (ctx %v), want the end's error", err, ctx.Err())
	}
}
