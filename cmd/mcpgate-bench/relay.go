package main

import (
	"bytes"
	"io"
	"net/http"
)

// relay is the floor of the federated comparison: the least an HTTP MCP
// gateway can do in front of an MCP server. Per POST it reads the body,
// posts the same bytes to the upstream on a reused connection (one shared
// net/http Transport, keep-alive) with the headers the Streamable HTTP
// transport defines, and copies the upstream's status, those headers and
// its body back. It parses nothing, checks nothing and keeps no session of
// its own (the caller's Mcp-Session-Id goes through), so what the
// federated target costs above it is the price of what mcpgate does on
// top: decoding, schema checks, its own upstream session, metrics.
type relay struct {
	upstream string // the upstream's MCP endpoint URL
	client   *http.Client
}

func newRelay(upstream string) *relay {
	return &relay{upstream: upstream, client: hopClient()}
}

// relayHeaders are the request and answer headers the relay carries.
var relayHeaders = []string{"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

func (rl *relay) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mcp", rl.serveMCP)
	mux.HandleFunc("GET /metrics", serveRuntimeMetrics)
	return mux
}

func (rl *relay) serveMCP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "relay: read the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, rl.upstream, bytes.NewReader(body))
	if err != nil {
		http.Error(w, "relay: "+err.Error(), http.StatusInternalServerError)
		return
	}
	for _, k := range relayHeaders {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := rl.client.Do(req)
	if err != nil {
		http.Error(w, "relay: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, k := range relayHeaders {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, 4<<20))
}
