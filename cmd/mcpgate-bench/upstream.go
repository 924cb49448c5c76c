package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The recording upstream: a small, fast REST API whose every answer echoes
// what the call sent, so the driver can tell its own answer from another
// client's. Its OpenAPI document tags all four operations agent-exposed.
//
//	GET  /items/{id}?q=V  200 {"id":id,"q":V}           (getItem: the hot read)
//	POST /items {"name"}  201 {"id":n,"name":name}      (createItem: a write)
//	GET  /fail            500 {"error":...}             (failItem: an upstream failure)
//	GET  /slow/{id}?q=V   as getItem, after a delay     (slowItem: a slow upstream)
//	GET  /openapi.json    the document
//	GET  /metrics         go_memstats_alloc_bytes_total, go_goroutines (text format)
//
// It counts the requests of each route ("recording") and reports the counts
// on /metrics as bench_upstream_requests_total, so a run can check that
// every call it counted did reach the API.
type upstreamServer struct {
	doc    []byte
	delay  time.Duration
	counts [4]atomic.Int64 // getItem, createItem, failItem, slowItem
	nextID atomic.Int64
}

// Tool names as mcpgate derives them from the operationIds.
const (
	toolGet    = "getItem"
	toolCreate = "createItem"
	toolFail   = "failItem"
	toolSlow   = "slowItem"
)

// upstreamDoc is the OpenAPI document; %s is the server URL.
const upstreamDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "mcpgate-bench upstream", "version": "1"},
  "servers": [{"url": %q}],
  "paths": {
    "/items/{id}": {"get": {
      "operationId": "getItem", "tags": ["agent-exposed"], "summary": "Read one item",
      "parameters": [
        {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "q", "in": "query", "required": true, "schema": {"type": "string"}}
      ],
      "responses": {"200": {"description": "the item", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Echo"}}}}}
    }},
    "/items": {"post": {
      "operationId": "createItem", "tags": ["agent-exposed"], "summary": "Create an item",
      "requestBody": {"required": true, "content": {"application/json": {"schema": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}},
      "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {
        "type": "object", "required": ["id", "name"], "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}}}}}
    }},
    "/fail": {"get": {
      "operationId": "failItem", "tags": ["agent-exposed"], "summary": "Always fails with 500",
      "responses": {"200": {"description": "never", "content": {"application/json": {"schema": {"type": "object"}}}}}
    }},
    "/slow/{id}": {"get": {
      "operationId": "slowItem", "tags": ["agent-exposed"], "summary": "Read one item, slowly",
      "parameters": [
        {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "q", "in": "query", "required": true, "schema": {"type": "string"}}
      ],
      "responses": {"200": {"description": "the item", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Echo"}}}}}
    }}
  },
  "components": {"schemas": {"Echo": {
    "type": "object", "required": ["id", "q"],
    "properties": {"id": {"type": "string"}, "q": {"type": "string"}}
  }}}
}`

func newUpstreamServer(baseURL string, delay time.Duration) *upstreamServer {
	return &upstreamServer{doc: fmt.Appendf(nil, upstreamDoc, baseURL), delay: delay}
}

func (u *upstreamServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		u.counts[0].Add(1)
		writeEcho(w, r)
	})
	mux.HandleFunc("POST /items", func(w http.ResponseWriter, r *http.Request) {
		u.counts[1].Add(1)
		var in struct {
			Name string `json:"name"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&in); err != nil || in.Name == "" {
			http.Error(w, `{"error":"body must be {\"name\": string}"}`, http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		}{u.nextID.Add(1), in.Name})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(out)
	})
	mux.HandleFunc("GET /fail", func(w http.ResponseWriter, r *http.Request) {
		u.counts[2].Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":"upstream failure, on purpose (mcpgate-bench)"}`)
	})
	mux.HandleFunc("GET /slow/{id}", func(w http.ResponseWriter, r *http.Request) {
		u.counts[3].Add(1)
		select {
		case <-time.After(u.delay):
		case <-r.Context().Done():
			return
		}
		writeEcho(w, r)
	})
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(u.doc)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		writeRuntimeMetrics(&b)
		for i, name := range []string{toolGet, toolCreate, toolFail, toolSlow} {
			fmt.Fprintf(&b, "bench_upstream_requests_total{operation=%q} %d\n", name, u.counts[i].Load())
		}
		io.WriteString(w, b.String())
	})
	return mux
}

// writeEcho answers {"id": <path id>, "q": <query q>}.
func writeEcho(w http.ResponseWriter, r *http.Request) {
	out, _ := json.Marshal(struct {
		ID string `json:"id"`
		Q  string `json:"q"`
	}{r.PathValue("id"), r.URL.Query().Get("q")})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}
