package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// baseline is the SDK-free pass-through: the floor any gateway pays for
// speaking MCP over Streamable HTTP in front of a REST API. Per POST it parses
// one JSON-RPC message with encoding/json, forwards a tools/call to the
// upstream with net/http (one shared Transport, keep-alive), and answers
// application/json with content text + structuredContent. No go-sdk, no
// session, no schema validation, no logging: whatever mcpgate costs above
// this is the price of what it does on top.
//
// initialize is answered minimally and notifications with 202, so the same
// driver can talk to it; tools/list is one precomputed answer.
type baseline struct {
	upstream string
	client   *http.Client
}

func newBaseline(upstreamURL string) *baseline {
	return &baseline{upstream: upstreamURL, client: hopClient()}
}

// hopClient is the HTTP client of the bench's own hops (the baseline and
// the relay): one shared Transport, connections kept alive, enough idle
// ones for every worker.
func hopClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// serveRuntimeMetrics answers GET /metrics of a bench role with the two
// runtime figures the driver reads.
func serveRuntimeMetrics(w http.ResponseWriter, _ *http.Request) {
	var sb strings.Builder
	writeRuntimeMetrics(&sb)
	io.WriteString(w, sb.String())
}

// baselineTools is the baseline's whole tools/list result.
const baselineTools = `{"tools":[` +
	`{"name":"getItem","inputSchema":{"type":"object","properties":{"id":{"type":"string"},"q":{"type":"string"}},"required":["id","q"]}},` +
	`{"name":"createItem","inputSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},` +
	`{"name":"failItem","inputSchema":{"type":"object"}},` +
	`{"name":"slowItem","inputSchema":{"type":"object","properties":{"id":{"type":"string"},"q":{"type":"string"}},"required":["id","q"]}}]}`

type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			ID   string `json:"id"`
			Q    string `json:"q"`
			Name string `json:"name"`
		} `json:"arguments"`
	} `json:"params"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type callResult struct {
	Content           []textContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

func (b *baseline) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mcp", b.serveMCP)
	mux.HandleFunc("GET /metrics", serveRuntimeMetrics)
	return mux
}

func (b *baseline) serveMCP(w http.ResponseWriter, r *http.Request) {
	var req rpcRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&req); err != nil {
		writeRPC(w, nil, nil, &rpcError{-32700, "parse error: " + err.Error()})
		return
	}
	if req.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch req.Method {
	case "initialize":
		writeRPC(w, req.ID, json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"baseline","version":"1"}}`), nil)
	case "tools/list":
		writeRPC(w, req.ID, json.RawMessage(baselineTools), nil)
	case "tools/call":
		res, err := b.call(r, &req)
		if err != nil {
			writeRPC(w, req.ID, nil, err)
			return
		}
		writeRPC(w, req.ID, res, nil)
	default:
		writeRPC(w, req.ID, nil, &rpcError{-32601, "method not found"})
	}
}

// call forwards one tools/call to the upstream and maps the answer: a 2xx
// JSON body becomes content text and structuredContent (its bytes reused,
// not decoded), anything else an isError result.
func (b *baseline) call(r *http.Request, req *rpcRequest) (*callResult, *rpcError) {
	a := &req.Params.Arguments
	var method, target string
	var body io.Reader
	switch req.Params.Name {
	case toolGet:
		method, target = http.MethodGet, b.upstream+"/items/"+url.PathEscape(a.ID)+"?q="+url.QueryEscape(a.Q)
	case toolSlow:
		method, target = http.MethodGet, b.upstream+"/slow/"+url.PathEscape(a.ID)+"?q="+url.QueryEscape(a.Q)
	case toolFail:
		method, target = http.MethodGet, b.upstream+"/fail"
	case toolCreate:
		j, _ := json.Marshal(struct {
			Name string `json:"name"`
		}{a.Name})
		method, target, body = http.MethodPost, b.upstream+"/items", bytes.NewReader(j)
	default:
		return nil, &rpcError{-32602, "unknown tool " + strconv.Quote(req.Params.Name)}
	}
	ureq, err := http.NewRequestWithContext(r.Context(), method, target, body)
	if err != nil {
		return nil, &rpcError{-32603, err.Error()}
	}
	if body != nil {
		ureq.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.client.Do(ureq)
	if err != nil {
		return &callResult{Content: []textContent{{"text", "upstream: " + err.Error()}}, IsError: true}, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return &callResult{Content: []textContent{{"text", "upstream: " + err.Error()}}, IsError: true}, nil
	}
	if resp.StatusCode/100 != 2 {
		return &callResult{Content: []textContent{{"text", "upstream answered " + resp.Status + ": " + string(data)}}, IsError: true}, nil
	}
	res := &callResult{Content: []textContent{{"text", string(data)}}}
	if json.Valid(data) && len(data) > 0 && data[0] == '{' {
		res.StructuredContent = data
	}
	return res, nil
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, e *rpcError) {
	if id == nil {
		id = json.RawMessage("null")
	}
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}{"2.0", id, result, e})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// listenLocal listens on a free port of 127.0.0.1.
func listenLocal() (net.Listener, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	return ln, "http://" + ln.Addr().String(), nil
}
