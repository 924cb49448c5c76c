package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzStdio feeds arbitrary input to a StdioTransport served by a real
// go-sdk server: it must not panic, must end at EOF, and every line it writes
// must be one JSON-RPC message whose error, if any, has a non-zero code.
func FuzzStdio(f *testing.F) {
	for _, s := range []string{
		stdioInit + "\n" + stdioInitialized + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n",
		"\x00\n[1,2]\n{}\n\"x\"\n",
		`{"jsonrpc":"2.0","id":1,"method":"shutdown"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"x"}` + "\n" + `{"jsonrpc":"2.0","id":1,"result":{}}`,
		stdioInit + "\n" + stdioInit + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}` + "\n",
		"\xff\xfe{\n\r\n  \n",
	} {
		f.Add([]byte(s))
	}
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
	})
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
