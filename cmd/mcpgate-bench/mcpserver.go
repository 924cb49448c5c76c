package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP upstream of the federated comparison: a go-sdk server
// (mcp.NewServer) behind mcp.NewStreamableHTTPHandler, stateless, answering
// application/json, with the recording upstream's four tools as MCP tools
// of the same names and arguments, so the driver's every mode can call it
// and check its answers:
//
//	getItem {id, q}    text + structuredContent {"id":id,"q":q}
//	createItem {name}  text + structuredContent {"id":n,"name":name}
//	failItem {}        isError
//	slowItem {id, q}   as getItem, after a delay
//
// Served at /mcp; GET /metrics has go_memstats_alloc_bytes_total and
// go_goroutines like the other roles; GET /_count is the number of
// handshakes so far (initialize and server/discover requests, counted by a
// wrapper in front of the handler), a decimal integer: the federated target
// must make none per call.
type mcpServer struct {
	delay      time.Duration
	handshakes atomic.Int64
	nextID     atomic.Int64
}

type echoArgs struct {
	ID string `json:"id"`
	Q  string `json:"q"`
}

type createArgs struct {
	Name string `json:"name"`
}

type created struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

func (m *mcpServer) handler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpgate-bench-mcp", Version: "1"}, nil)
	echo := func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, echoArgs, error) {
		return nil, in, nil // go-sdk writes the output as text and as structuredContent
	}
	mcp.AddTool(s, &mcp.Tool{Name: toolGet, Description: "Read one item"}, echo)
	mcp.AddTool(s, &mcp.Tool{Name: toolCreate, Description: "Create an item"},
		func(_ context.Context, _ *mcp.CallToolRequest, in createArgs) (*mcp.CallToolResult, created, error) {
			if in.Name == "" {
				return nil, created{}, errors.New("name is required")
			}
			return nil, created{m.nextID.Add(1), in.Name}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: toolFail, Description: "Always fails"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
			return nil, struct{}{}, errors.New("upstream failure, on purpose (mcpgate-bench)")
		})
	mcp.AddTool(s, &mcp.Tool{Name: toolSlow, Description: "Read one item, slowly"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, echoArgs, error) {
			select {
			case <-time.After(m.delay):
			case <-ctx.Done():
				return nil, echoArgs{}, ctx.Err()
			}
			return echo(ctx, req, in)
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})

	mux := http.NewServeMux()
	mux.Handle("/mcp", m.counting(h))
	mux.HandleFunc("GET /metrics", serveRuntimeMetrics)
	mux.HandleFunc("GET /_count", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strconv.FormatInt(m.handshakes.Load(), 10))
	})
	return mux
}

// counting counts the handshakes among the POSTs to h: the body is read
// whole (go-sdk reads it whole too), looked at, and handed on.
func (m *mcpServer) counting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			r.Body.Close()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			m.handshakes.Add(int64(countHandshakes(body)))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

// countHandshakes is the number of initialize and server/discover requests
// in one JSON-RPC message or batch. Only a body that names one is parsed.
func countHandshakes(body []byte) int {
	if !bytes.Contains(body, []byte(`"initialize"`)) && !bytes.Contains(body, []byte(`"server/discover"`)) {
		return 0
	}
	type msg struct {
		Method string `json:"method"`
	}
	var batch []msg
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		if json.Unmarshal(b, &batch) != nil {
			return 0
		}
	} else {
		var one msg
		if json.Unmarshal(b, &one) != nil {
			return 0
		}
		batch = []msg{one}
	}
	n := 0
	for _, m := range batch {
		if m.Method == "initialize" || m.Method == "server/discover" {
			n++
		}
	}
	return n
}

// handshakes reads a go-sdk server role's handshake count from base/_count.
func handshakes(base string) (int64, error) {
	resp, err := metricsClient.Get(base + "/_count")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s/_count: HTTP %d", base, resp.StatusCode)
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
