package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzStdio feeds arbitrary input to a StdioTransport served by a real
// go-sdk server: it must not panic, must end at EOF, and every line it writes
// must be one JSON-RPC message whose error, if any, has a non-zero code.
//
// Then it sends the same input, after initialize, to a gateway with its
// stdio fast path (stdioFast) and to the same gateway without (go-sdk
// answers every line), and requires the same answers, as in
// TestStdioFastDifferential: byte for byte but for go-sdk's HTML escapes,
// by id. Answers that depend on timing are not compared: an input that
// reuses an id (whether the second call is refused depends on whether the
// first was answered) or cancels a call.
func FuzzStdio(f *testing.F) {
	for _, s := range []string{
		stdioInit + "\n" + stdioInitialized + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n",
		"\x00\n[1,2]\n{}\n\"x\"\n",
		`{"jsonrpc":"2.0","id":1,"method":"shutdown"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"x"}` + "\n" + `{"jsonrpc":"2.0","id":1,"result":{}}`,
		stdioInit + "\n" + stdioInit + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}` + "\n",
		"\xff\xfe{\n\r\n  \n",
		rpc("2", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`) + "\n" +
			rpc(`"s<&>"`, "tools/call", `{"name":"get_typed","arguments":{"id":99}}`) + "\n" +
			rpc("3", "tools/call", `{"name":"fail","_meta":{"progressToken":1}}`) + "\n" +
			rpc("4", "tools/call", `{"name":"get_thing","arguments":{"id":"far-too-long"}}`) + "\n",
		rpc("5", "tools/call", `{"name":"nope"}`) + "\n" + rpc("6", "tools/call", `{"name":"list_things","task":{}}`) + "\n" +
			rpc("7", "tools/call", `{"name":"html","arguments":null}`) + "\n" + rpc("-0", "tools/call", `{"name":"empty"}`),
	} {
		f.Add([]byte(s))
	}
	pair := newStdioPair(f, false)
	f.Fuzz(func(t *testing.T, in []byte) {
		srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		var out bytes.Buffer
		tr := NewStdioTransport(bytes.NewReader(in), &lockedWriter{w: &out}, &StdioOptions{MaxLineBytes: 256, DrainTimeout: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Run(ctx, tr)
		if ctx.Err() != nil {
			t.Fatalf("session did not end at EOF")
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code int64 `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("output line is not a JSON-RPC message: %q", sc.Bytes())
			}
			if m.Error != nil && m.Error.Code == 0 {
				t.Fatalf("error with code 0: %s", sc.Bytes())
			}
		}
		if !onceEach(in) {
			return
		}
		first := strings.Replace(stdioInit, `"id":1`, `"id":"init"`, 1) + "\n" + stdioInitialized + "\n"
		got := serveSequenced(t, pair.fast, first, string(in))
		want := serveSequenced(t, pair.sdk, first, string(in))
		if len(got) != len(want) {
			t.Fatalf("fast path answers %q\ngo-sdk answers %q", got, want)
		}
		for id, w := range want {
			g := got[id]
			if htmlUnescaped.Replace(g) != htmlUnescaped.Replace(w) || normalised(t, g) != normalised(t, w) {
				t.Fatalf("id %s differs:\nfast: %s\n sdk: %s", id, g, w)
			}
		}
	})
}

// onceEach reports whether every line of in that has an id has one of its
// own (as go-sdk compares them: a number as int64(v)), and none is a
// notifications/cancelled: the answers to such input do not depend on
// timing.
func onceEach(in []byte) bool {
	if bytes.Contains(in, []byte("cancelled")) {
		return false
	}
	seen := map[string]bool{}
	for line := range bytes.SplitSeq(in, []byte("\n")) {
		var m struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		key := fmt.Sprintf("%T %v", m.ID, m.ID)
		if v, ok := m.ID.(float64); ok {
			key = fmt.Sprint(int64(v))
		}
		if seen[key] {
			return false
		}
		seen[key] = true
	}
	return true
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
