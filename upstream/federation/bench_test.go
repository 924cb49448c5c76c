package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCallTool compares a tools/call through an Upstream (CallTool,
// and Forward, the lean hop) with the same call on a go-sdk client session
// and as a bare net/http POST, all to a stateless JSON go-sdk server: the
// federation client's own cost. "parallel" runs 8 callers
// (SetParallelism on GOMAXPROCS). p50-µs is the median latency.
func BenchmarkCallTool(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer srv.Close()
	args := map[string]any{"q": "hello"}

	direct := func(b *testing.B) func(context.Context) error {
		c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
		cs, err := c.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: upstream.NewTransport()}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return func(ctx context.Context) error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
			return err
		}
	}
	federated := func(b *testing.B) func(context.Context) error {
		u, err := New(Config{URL: srv.URL}, &Options{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { u.Close() })
		return func(ctx context.Context) error {
			_, err := u.CallTool(ctx, "Bearer t", &mcp.CallToolParams{Name: "echo", Arguments: args}, false, nil)
			return err
		}
	}
	forward := func(b *testing.B) func(context.Context) error {
		u, err := New(Config{URL: srv.URL}, &Options{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { u.Close() })
		p := &ForwardParams{Name: "echo", Arguments: json.RawMessage(`{"q":"hello"}`)}
		return func(ctx context.Context) error {
			_, err := u.Forward(ctx, "Bearer t", "2025-06-18", p, nil)
			return err
		}
	}
	// raw: the same POST by net/http alone, its answer read and not
	// decoded: the floor of any Go client of this server.
	raw := func(b *testing.B) func(context.Context) error {
		hc := &http.Client{Transport: upstream.NewTransport()}
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"q":"hello"}}}`)
		return func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return err
		}
	}
	for _, m := range []struct {
		name string
		mk   func(*testing.B) func(context.Context) error
	}{{"direct", direct}, {"federated", federated}, {"forward", forward}, {"raw", raw}} {
		b.Run(m.name+"/c=1", func(b *testing.B) {
			call := m.mk(b)
			if err := call(b.Context()); err != nil { // connect outside the timing
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if err := call(b.Context()); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
		b.Run(m.name+"/parallel", func(b *testing.B) {
			call := m.mk(b)
			if err := call(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(max(1, 8/testingProcs()))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(context.Background()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }
