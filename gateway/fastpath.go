package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/gateway/internal/parallel"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fastPath answers the two hot methods of a stateless gateway — tools/list
// and tools/call, one JSON-RPC request per POST — without a go-sdk session:
// tools/list from bytes made once per catalog, tools/call straight into the
// tool's binding. This is hand-written protocol code where go-sdk serves, so
// it is held to two rules:
//
//   - It answers only what it fully understands, after applying every check
//     go-sdk's StreamableHTTPHandler (v1.8.0) would have applied to that
//     request; for anything else — another method, a notification, a
//     protocol version other than those in [fastVersions], a progressToken,
//     a cursor it did not make, params go-sdk would refuse, a failed Accept
//     or Host check — it hands the request to go-sdk untouched, which
//     answers exactly as it would have without the fast path.
//   - Its answers are go-sdk's, in meaning: TestFastPathDifferential sends
//     every request of its table through both and compares the JSON.
//
// Hand-written where go-sdk serves, because it pays: see BenchmarkToolsCall
// (24–26 µs, 15 KB and 124 allocations per call, against go-sdk's 373–398
// µs, 320 KB and 258: ×14) and BenchmarkToolsList (GitHub's 600+ tools:
// 14–30 µs against go-sdk's 63–72 ms, which marshals 1.5 MB in 95k
// allocations per request; over loopback, 1.05 ms p50 against 31 ms). Same
// run, 2 cores shared with other work. Issue 9's profile puts go-sdk's
// per-POST session, decoders and SSE machinery at ~80% of the gateway's CPU
// per call; docs/go-sdk-decoder.md is the fix proposed for the requests that
// still go to go-sdk.
type fastPath struct {
	g      *Gateway
	served []*Tool                        // the tools listed, for the views: every tool served, or search mode's pinned ones
	meta   []*mcp.Tool                    // search mode's meta-tools, listed to everyone; nil when flat
	tools  map[string]*Tool               // the tools served, by name
	all    *toolPages                     // every tool: the list of `auth.list: all`
	views  *lru.Cache[string, *toolPages] // nil unless auth.list is callable
	// viewKey names the view of a caller's verified token (see
	// Gateway.listKey).
	viewKey func(*auth.TokenInfo) string
	// building serializes the building of views missing from the cache, so
	// that a burst of callers with one new key builds it once.
	building sync.Mutex

	// dynamic: the tools served may change (an upstream MCP server's, see
	// Gateway.relist): tools/list is go-sdk's, and a tool not known here
	// is go-sdk's to answer.
	dynamic bool
	// stateful: the gateway keeps sessions, and the front door hands the
	// fast path only a tools/call on a live, initialized session of its
	// caller (frontDoor.sessionFastPath). It answers the calls of REST and
	// playbook tools; tools/list (whose cache scope, search-mode view and
	// list_changed follow the session) and federated tools (whose upstream
	// may ask the session's client for sampling, elicitation or roots) stay
	// go-sdk's.
	stateful bool

	onServe func() // tests: called for each request answered here
}

// maxViews bounds the tools/list views kept under `auth.list: callable`. A
// view is keyed by the policy-relevant scopes a caller holds (see
// auth.ScopeSet), so there are at most 2^n of them for n such scopes; a
// policy with two scopes and a few OpenAPI ones has a handful. A view is as
// large as the list it holds (GitHub's 600+ tools: up to 1.5 MB), so the
// bound is memory: 32 views of that are 48 MB. Past it the least recently
// used view is rebuilt when next asked for (GitHub: 12–27 ms, measured on 2
// shared cores; a hit costs under 100 ns).
const maxViews = 32

// viewOf returns the prebuilt tools/list that r may read: every tool, or,
// under `auth.list: callable`, the tools the caller's verified scopes let it
// call, built on first use and cached by the scopes that decided it — never
// by token, so the cache holds at most one view per distinct set of
// policy-relevant scopes, and no token outlives its request here.
func (f *fastPath) viewOf(r *http.Request) (*toolPages, error) {
	if f.views == nil {
		return f.all, nil
	}
	key := f.viewKey(auth.TokenInfoFromContext(r.Context()))
	if p, ok := f.views.Get(key); ok {
		return p, nil
	}
	f.building.Lock()
	defer f.building.Unlock()
	if p, ok := f.views.Get(key); ok {
		return p, nil
	}
	p, err := buildToolPages(f.g.callableBy(key, f.served), f.meta, mcp.DefaultPageSize, cacheScopeOf(true))
	if err != nil {
		return nil, err
	}
	f.views.Add(key, p)
	return p, nil
}

// toolPages is a tools/list, prebuilt: the JSON of each page's result, and
// the cursor that names each page after the first.
type toolPages struct {
	pages   [][]byte
	cursors map[string]int // nextCursor → page index
	after   map[string]int // the last name of a page → the index of the next
}

// fastVersions are the MCP-Protocol-Version header values the fast path
// answers ("" is a request without the header, which go-sdk treats as
// 2025-03-26). For each, go-sdk v1.8.0 answers tools/list and tools/call of a
// stateless request identically: no priming event (that needs an event
// store), no result type or server info in _meta, no Mcp-Method header
// checks. 2026-07-28 is excluded: it changes all three.
var fastVersions = []string{"", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// newFastPath prebuilds the tools/list pages of the tools served. It returns
// nil — every request goes to go-sdk — when Options.DisableFastPath is set,
// or when MCPGODEBUG is set (its switches change go-sdk's answers in ways the
// fast path does not copy).
func newFastPath(g *Gateway, served []*Tool) (*fastPath, error) {
	if g.opts.DisableFastPath || os.Getenv("MCPGODEBUG") != "" {
		return nil, nil
	}
	f := &fastPath{g: g, served: served, tools: make(map[string]*Tool, len(served)), dynamic: len(g.federated) > 0, stateful: g.cfg.Stateful}
	for _, t := range served {
		f.tools[t.Tool.Name] = t
	}
	if f.stateful {
		return f, nil // calls only: no list to build
	}
	if g.search != nil {
		// Search mode lists the pinned tools and the meta-tools; every
		// tool stays callable by name.
		f.served, f.meta = g.search.listed(nil), g.search.metaList()
	}
	var err error
	if g.listCallable() {
		// Built per caller's scopes, on first use (viewOf).
		f.views, err = lru.New[string, *toolPages](maxViews)
		f.viewKey = g.listKey()
	} else {
		f.all, err = buildToolPages(f.served, f.meta, mcp.DefaultPageSize, cacheScopeOf(false))
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// buildToolPages marshals tools/list the way go-sdk's Server.listTools does:
// tools sorted by name, pageSize per page, each page but the last naming the
// next with a cursor: a gob of the page's last name, URL base64 — go-sdk's
// encoding, so that a cursor made by either path is accepted by both. (The
// bytes differ from go-sdk's own, whose gob type id depends on what the
// process encoded first; within one binary they are the same on every
// start.) cacheScope is the result's cacheScope (see cacheScopeOf). meta
// are search mode's meta-tools, listed beside served.
func buildToolPages(served []*Tool, meta []*mcp.Tool, pageSize int, cacheScope string) (*toolPages, error) {
	type listed struct {
		tool *mcp.Tool
		wire *catalog.ToolWire // a snapshot's tool's JSON; nil for the rest
	}
	tools := make([]listed, 0, len(served)+len(meta))
	for _, t := range served {
		tools = append(tools, listed{t.Tool, t.Wire()})
	}
	for _, t := range meta {
		tools = append(tools, listed{tool: t})
	}
	slices.SortFunc(tools, func(a, b listed) int { return strings.Compare(a.tool.Name, b.tool.Name) })
	tasks := taskToolNames(served) // go-sdk's answer gets them from taskDoor.middleware
	// Each tool's JSON on every core (a snapshot's tools' is at hand),
	// then each page's around them (see spliceTools): one marshal of the
	// page held a growing buffer of its size twice over.
	wire := make([]toolPieces, len(tools))
	errs := make([]error, len(tools))
	parallel.Do(len(tools), func(i int) { wire[i], errs[i] = piecesOf(tools[i].tool, tools[i].wire) })
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gateway: prebuild tools/list: %v", err)
	}
	p := &toolPages{cursors: map[string]int{}, after: map[string]int{}}
	for start := 0; ; start += pageSize {
		end := min(start+pageSize, len(tools))
		res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
		res.CacheScope = cacheScope
		if end < len(tools) {
			last := tools[end-1].tool.Name
			c, err := sdkwire.EncodeCursor(last)
			if err != nil {
				return nil, err
			}
			res.NextCursor = c
			p.cursors[c] = len(p.pages) + 1
			p.after[last] = len(p.pages) + 1
		}
		b, err := sdkwire.Marshal(res)
		if err == nil {
			b, err = spliceTools(b, wire[start:end])
		}
		if err == nil {
			b, err = withTaskSupport(b, tasks)
		}
		if err != nil {
			return nil, fmt.Errorf("gateway: prebuild tools/list: %v", err)
		}
		p.pages = append(p.pages, b)
		if end == len(tools) {
			return p, nil
		}
	}
}

// spliceTools puts the tools' JSON into a page's, marshalled with no tool:
// what marshalling the page with them gives, byte for byte, since
// encoding/json writes a slice's elements as it writes each alone, one
// comma apart (TestSpliceTools). The page's "tools":[] is found once: no
// other key of the result can hold it (its cursor is base64, its _meta
// unset).
func spliceTools(page []byte, tools []toolPieces) ([]byte, error) {
	empty := []byte(`"tools":[]`)
	i := bytes.Index(page, empty)
	if i < 0 || bytes.LastIndex(page, empty) != i {
		return nil, errors.New(`the list's "tools" is not where it was expected`)
	}
	n := len(page)
	for _, t := range tools {
		for _, p := range t {
			n += len(p)
		}
		n++
	}
	out := make([]byte, 0, n)
	out = append(out, page[:i+len(empty)-1]...)
	for k, t := range tools {
		if k > 0 {
			out = append(out, ',')
		}
		for _, p := range t {
			out = append(out, p...)
		}
	}
	return append(out, page[i+len(empty)-1:]...), nil
}

// toolPieces is a tool's JSON in up to five pieces, written one after
// another (see catalog.ToolWire); a tool marshalled whole is one.
type toolPieces [5][]byte

// piecesOf is sdkwire.Marshal(t), in pieces: w's, for a tool read from a
// snapshot; else, for a tool whose schemas are JSON, the tool marshalled
// with a stand-in for each (catalog.NewToolWire: encoding/json would check
// the schemas and copy them compacted, a third of a start's work for
// Kubernetes' list); else the tool marshalled whole.
func piecesOf(t *mcp.Tool, w *catalog.ToolWire) (toolPieces, error) {
	if w == nil {
		var err error
		if w, err = catalog.NewToolWire(t); err != nil {
			return toolPieces{}, err
		}
	}
	if w != nil {
		return w.Pieces(), nil
	}
	b, err := sdkwire.Marshal(t)
	return toolPieces{b}, err
}

// page returns the index of the page a cursor names: one of the fast path's
// own, or go-sdk's for the same place. A cursor that names another place, or
// nothing, is go-sdk's to answer (it answers an invalid one with -32602).
func (p *toolPages) page(cursor string) (int, bool) {
	if i, ok := p.cursors[cursor]; ok {
		return i, true
	}
	uid, ok := sdkwire.DecodeCursor(cursor)
	if !ok {
		return 0, false
	}
	i, ok := p.after[uid]
	return i, ok
}

// serve answers r if it is a request the fast path takes, and reports whether
// it did. body is r's body, already read and checked to be one JSON object.
// When it returns false it has written nothing and r is untouched.
func (f *fastPath) serve(w http.ResponseWriter, r *http.Request, msg *message) bool {
	if !sdkwire.WouldRead(r, fastVersions) {
		return false
	}
	if !msg.ok || msg.VersionTag != "2.0" {
		return false
	}
	id, ok := sdkwire.EchoID(msg.ID)
	if !ok {
		return false // a notification, or an id go-sdk would mangle: its answer
	}
	var served bool
	switch msg.method {
	case "tools/list":
		if f.dynamic || f.stateful {
			return false // go-sdk's list follows the upstream MCP servers' changes
		}
		served = f.serveList(w, r, id, msg.Params)
	case "tools/call":
		served = f.serveCall(w, r, id, msg.Params)
	}
	if served {
		f.g.metrics.rpcMethod(msg.method) // nil-safe: metrics off
		if f.onServe != nil {
			f.onServe()
		}
	}
	return served
}

// sdkHandsOff reports whether a request's _meta asks for what only go-sdk
// does: progress notifications (which need the SSE stream of a session) or
// the 2026-07-28 per-request protocol fields (io.modelcontextprotocol/...).
func sdkHandsOff(meta mcp.Meta) bool {
	for k := range meta {
		if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") {
			return true
		}
	}
	return false
}

func (f *fastPath) serveList(w http.ResponseWriter, r *http.Request, id, params []byte) bool {
	// go-sdk: params may be missing or null; otherwise they must decode.
	var p mcp.ListToolsParams
	if len(params) > 0 && !sdkwire.Parse(params, &p) {
		return false
	}
	if sdkHandsOff(p.Meta) {
		return false
	}
	list, err := f.viewOf(r)
	if err != nil {
		return false // go-sdk answers, and its own tools/list filter applies
	}
	page := 0
	if p.Cursor != "" {
		var ok bool
		if page, ok = list.page(p.Cursor); !ok {
			return false
		}
	}
	sdkwire.WriteResult(w, id, list.pages[page])
	return true
}

// callOf reads a tools/call's params as go-sdk would, and reports whether
// the fast path takes the call: then t is the tool it names, or nil for a
// tool go-sdk would answer "unknown tool" (unknownTool).
func (f *fastPath) callOf(params []byte) (t *Tool, p *mcp.CallToolParamsRaw, take bool) {
	// go-sdk: tools/call requires params, and they must decode.
	p = new(mcp.CallToolParamsRaw)
	if len(params) == 0 || !sdkwire.Parse(params, p) || bytes.Equal(params, []byte("null")) {
		return nil, nil, false
	}
	if sdkHandsOff(p.Meta) || p.InputResponses != nil || p.RequestState != "" {
		return nil, nil, false
	}
	if f.g.search != nil && f.g.search.meta[p.Name] != nil {
		return nil, nil, false // a search meta-call: go-sdk's handler runs it (search.go)
	}
	t, ok := f.tools[p.Name]
	if f.dynamic {
		// The tools served now: an upstream MCP server's may have been
		// added, changed or withheld since the fast path was built.
		if t, ok = f.g.live.lookup(p.Name); !ok {
			return nil, nil, false
		}
	}
	return t, p, true
}

// unknownTool is Server.callTool's answer to a tool it does not have:
// message, with code jsonrpc.CodeInvalidParams.
func unknownTool(name string) string { return fmt.Sprintf("unknown tool %q", name) }

func (f *fastPath) serveCall(w http.ResponseWriter, r *http.Request, id, params []byte) bool {
	t, p, ok := f.callOf(params)
	if !ok {
		return false
	}
	if t == nil {
		sdkwire.WriteError(w, id, jsonrpc.CodeInvalidParams, unknownTool(p.Name))
		return true
	}
	// What go-sdk hands the tool handler of a POST: its header, and the
	// token info an auth middleware put in its context. The front door's
	// request id (set on every POST before the fast path) names the call in
	// its log line.
	req := &mcp.CallToolRequest{
		Params: p,
		Extra:  &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header},
	}
	if t.IsPlaybook() {
		return f.servePlaybook(w, r, id, t, req) // no progress token: nothing for go-sdk's session to carry
	}
	if t.Federated != nil {
		if f.stateful {
			return false // the upstream may call back to the session's client
		}
		return f.serveFederated(w, r, id, t, req) // it may yet hand the call to go-sdk
	}
	// The POST's own context: a client that hangs up cancels the call.
	holdFastCost(r.Context())
	f.writeCallResult(w, id, f.g.callTool(r.Context(), t, req))
	return true
}

// writeCallResult answers a tools/call with res, as go-sdk would.
func (f *fastPath) writeCallResult(w http.ResponseWriter, id []byte, res *mcp.CallToolResult) {
	if res.Content == nil {
		res.Content = []mcp.Content{} // Server.callTool: avoid "null"
	}
	if plainResult(res) {
		a := answerWriter{buf: sdkwire.GetBuffer(), w: w}
		a.buf.WriteString(`{"jsonrpc":"2.0","id":`)
		a.buf.Write(id)
		a.buf.WriteString(`,"result":`)
		sdkwire.SetJSONHeader(w) // before a large answer's first bytes go
		if a.callResult(res) {
			a.buf.WriteByte('}')
			a.flush() // not the connection: net/http sends a small answer with a Content-Length
			sdkwire.PutBuffer(a.buf)
			return
		}
		sdkwire.PutBuffer(a.buf)
	}
	data, err := res.MarshalJSON()
	if err != nil {
		// go-sdk would fail the call the same way: an internal error.
		sdkwire.WriteError(w, id, jsonrpc.CodeInternalError, fmt.Sprintf("marshaling call result: %v", err))
		return
	}
	sdkwire.WriteResult(w, id, data)
}
