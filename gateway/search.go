package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/gateway/catalog/search"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
)

// Search mode (config `catalog:`): for a catalog too large to list, tools/list
// holds the pinned tools and four meta-tools, and the others are found,
// described and called through them.
//
//   - search_tools ranks the tools served (search.Index: BM25 over names,
//     texts, parameters, tags, paths and upstream) and answers compact
//     cards: name, title, the description's first sentence, the four hints
//     the gateway's policy goes by (policyHints: a federated tool's
//     untrusted claims do not count) with their provenance, the upstream.
//   - describe_tools answers the tools' whole definitions, as tools/list
//     would list them. In stateful mode they join the session's tools/list,
//     and the session is sent notifications/tools/list_changed.
//   - call_read_only_tool is read-only: it refuses (isError, nothing sent)
//     a tool whose policy hints are not read-only, so a client that
//     auto-approves read-only calls is right to approve it.
//   - call_tool is destructive, and calls any tool.
//
// A meta-call is the real call: the real tool's handler runs it, with the
// real tool's argument checks, credentials, idempotent dispatch, metrics
// and log line; the front door's step-up check decides on the real tool
// (peekCall reads arguments.name of a meta-call); the result's _meta names
// the real tool (metaTool). Under auth.list: callable, search and describe
// show only what the caller may call. Search governs what is listed, never
// what is allowed: every tool stays callable by name with tools/call.
type searchMode struct {
	g      *Gateway
	meta   map[string]*mcp.Tool // the meta-tools, by name
	pinned []string             // catalog.pinned, as configured
	state  atomic.Pointer[searchState]
	// docs are what the index reads of each tool, made once (SearchDoc
	// needs the tool's operation, which the catalog drops after start-up)
	// and kept while the tool is served; rebuild's alone.
	docs map[*Tool]search.Doc

	// Stateful mode: what each session described, listed to it.
	mu        sync.Mutex
	described map[*mcp.ServerSession]*sessionTools
	changes   atomic.Uint64 // bumped by a change every session is told of (relist)
}

// sessionTools are the tools a session described, most recent last, and
// what it was told.
type sessionTools struct {
	names   []string
	pending bool   // a list_changed is owed to this session alone
	seen    uint64 // searchMode.changes when it was last told
}

// searchState is the tools searched, replaced whole when they change.
type searchState struct {
	tools  []*Tool // in index order
	byName map[string]*Tool
	index  *search.Index
}

// The meta-tools' names, and the _meta key naming the real tool.
const (
	metaSearch       = "search_tools"
	metaDescribe     = "describe_tools"
	metaCallReadOnly = "call_read_only_tool"
	metaCall         = "call_tool"
	// MetaTool is the _meta key of a meta-call's result naming the tool
	// that ran.
	MetaTool = "mcpgate/tool"
)

// Bounds of the meta-tools' arguments and of what a session keeps.
const (
	defaultSearchLimit = 8
	maxSearchLimit     = 50
	maxDescribe        = 50
	maxQueryBytes      = 1024
	// maxSessionTools bounds the tools a session's describes add to its
	// tools/list (the oldest go first): clients cap what they show
	// (VS Code: ~128), and a session must not grow the list without end.
	maxSessionTools = 128
	// maxCardText bounds a card's description: its first sentence.
	maxCardText = 200
)

// metaToolNames are the meta-tools, in the order they are described (the
// audit's list, catalog.SearchMetaTools).
var metaToolNames = catalog.SearchMetaTools

// newSearchMode returns the search mode of the tools served, or nil when
// the configuration lists them flat, and the tools to serve. A tool of
// the configuration's own upstreams (OpenAPI, playbooks) named like a
// meta-tool is an error naming it: the meta-tool would hide it. An MCP
// upstream's is not served, with a warning, as relist withholds one that
// arrives later: what an upstream offers must not decide whether the
// gateway starts. A pinned name that is not served is a warning (an MCP
// upstream's tool may arrive later).
func newSearchMode(g *Gateway, served []*Tool) (*searchMode, []*Tool, error) {
	if !g.cfg.Catalog.Search(len(served)) {
		return nil, served, nil
	}
	s := &searchMode{g: g, meta: metaTools(), pinned: g.cfg.Catalog.Pinned, described: map[*mcp.ServerSession]*sessionTools{}}
	kept := served[:0:0]
	for _, t := range served {
		switch {
		case s.meta[t.Tool.Name] == nil:
			kept = append(kept, t)
		case t.Federated != nil:
			g.logger.Warn("catalog.mode search: not serving an MCP upstream's tool named like a search meta-tool; give the upstream a tool_prefix", "upstream", t.Upstream, "tool", t.Tool.Name)
		default:
			return nil, nil, fmt.Errorf("catalog.mode search: upstream %s's tool %s has the name of a search meta-tool; rename it (upstreams[].rename) or list the catalog flat", t.Upstream, t.Tool.Name)
		}
	}
	served = kept
	s.rebuild(served)
	st := s.state.Load()
	for _, n := range s.pinned {
		if st.byName[n] == nil {
			g.logger.Warn("catalog.pinned names no tool served; it is listed once it is", "tool", n)
		}
	}
	g.logger.Info("catalog: search mode: tools/list holds the pinned tools and the search meta-tools", "tools", len(served), "pinned", len(s.pinned))
	return s, served, nil
}

// rebuild indexes the tools served now (at start, and after a relist,
// which holds live.mu: one rebuild at a time).
func (s *searchMode) rebuild(tools []*Tool) {
	tools = slices.Clone(tools)
	slices.SortFunc(tools, func(a, b *Tool) int { return strings.Compare(a.Tool.Name, b.Tool.Name) })
	docs := make([]search.Doc, len(tools))
	byName := make(map[string]*Tool, len(tools))
	kept := make(map[*Tool]search.Doc, len(tools))
	for i, t := range tools {
		d, ok := s.docs[t]
		if !ok {
			d = t.SearchDoc()
		}
		docs[i], kept[t] = d, d
		byName[t.Tool.Name] = t
	}
	s.docs = kept
	s.state.Store(&searchState{tools: tools, byName: byName, index: search.New(docs)})
}

// listed returns the catalog tools tools/list holds in search mode: the
// pinned ones served, and those the session described (stateful).
func (s *searchMode) listed(ss *mcp.ServerSession) []*Tool {
	st := s.state.Load()
	seen := map[string]bool{}
	var out []*Tool
	add := func(n string) {
		if t := st.byName[n]; t != nil && !seen[n] {
			seen[n] = true
			out = append(out, t)
		}
	}
	for _, n := range s.pinned {
		add(n)
	}
	if ss != nil {
		s.mu.Lock()
		if d := s.described[ss]; d != nil {
			for _, n := range d.names {
				add(n)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// metaList returns the meta-tools, for the fast path's tools/list.
func (s *searchMode) metaList() []*mcp.Tool {
	out := make([]*mcp.Tool, 0, len(metaToolNames))
	for _, n := range metaToolNames {
		out = append(out, s.meta[n])
	}
	return out
}

// listMiddleware answers tools/list in search mode, for go-sdk's session
// (stateful, 2026-07-28, federated upstreams): the pinned tools, the
// session's described ones and the meta-tools, in one page. The
// auth.list: callable filter (addListFilter), added after it, wraps it.
func (s *searchMode) listMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" {
			return next(ctx, method, req)
		}
		if p, ok := req.GetParams().(*mcp.ListToolsParams); ok && p != nil && p.Cursor != "" {
			// The one page has no next: a cursor names nothing (go-sdk's words).
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid cursor %q: in search mode tools/list is one page", p.Cursor)}
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		tools := s.metaList()
		for _, t := range s.listed(ss) {
			tools = append(tools, t.Tool)
		}
		slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
		res := &mcp.ListToolsResult{Tools: tools}
		res.CacheScope = cacheScopeOf(ss != nil && s.g.cfg.Stateful)
		return res, nil
	}
}

// notifyMiddleware lets notifications/tools/list_changed through to a
// session only when it concerns it: its own describe, or a change of the
// tools served (relist). go-sdk sends it to every session whenever a tool
// is added (describe re-adds describe_tools to make it send one).
func (s *searchMode) notifyMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "notifications/tools/list_changed" {
			return next(ctx, method, req)
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return next(ctx, method, req)
		}
		// Every session's own account of what it was told: one that
		// described nothing is told of changes of the tools served only,
		// never of another session's describe.
		changes := s.changes.Load()
		s.mu.Lock()
		d := s.session(ss, 0) // not known since its initialize: told of any change
		send := d.pending || d.seen < changes
		d.pending, d.seen = false, changes
		s.mu.Unlock()
		if !send {
			return nil, nil
		}
		return next(ctx, method, req)
	}
}

// session returns what is kept of ss, made on first use (seen: the changes
// it knows of) and forgotten when it ends. s.mu is held.
func (s *searchMode) session(ss *mcp.ServerSession, seen uint64) *sessionTools {
	d := s.described[ss]
	if d == nil {
		d = &sessionTools{seen: seen}
		s.described[ss] = d
		go func() { // forget it when the session ends
			_ = ss.Wait()
			s.mu.Lock()
			delete(s.described, ss)
			s.mu.Unlock()
		}()
	}
	return d
}

// trackSessions records each stateful session as it initializes, knowing
// the changes so far, so that it is told of later ones only
// (notifyMiddleware).
func (s *searchMode) trackSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "initialize" {
			s.mu.Lock()
			s.session(ss, s.changes.Load())
			s.mu.Unlock()
		}
		return next(ctx, method, req)
	}
}

// addDescribed adds names to the tools/list of session ss and has it told.
func (s *searchMode) addDescribed(ss *mcp.ServerSession, names []string) {
	if ss == nil || len(names) == 0 {
		return
	}
	s.mu.Lock()
	d := s.session(ss, s.changes.Load())
	added := false
	for _, n := range names {
		if slices.Contains(d.names, n) || slices.Contains(s.pinned, n) {
			continue
		}
		d.names = append(d.names, n)
		added = true
	}
	if over := len(d.names) - maxSessionTools; over > 0 {
		d.names = slices.Delete(d.names, 0, over)
	}
	if added {
		d.pending = true
	}
	s.mu.Unlock()
	if added {
		// go-sdk sends list_changed only when its tools change: re-adding
		// a meta-tool (the same definition) makes it, and notifyMiddleware
		// lets it through to the sessions owed one.
		s.g.server.AddTool(s.meta[metaDescribe], s.handler(metaDescribe))
	}
}

// handler is the go-sdk tool handler of meta-tool name.
func (s *searchMode) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		switch name {
		case metaSearch:
			return s.search(req, args), nil
		case metaDescribe:
			return s.describe(req, args), nil
		default:
			return s.call(ctx, name, req, args), nil
		}
	}
}

// toolError is a meta-tool's isError answer: the model reads it and may
// correct its call.
func toolError(format string, a ...any) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	res.SetError(fmt.Errorf(format, a...))
	return res
}

// decodeArgs decodes a meta-tool's arguments as go-sdk and the step-up
// check read JSON (sdkwire.Decode: case-sensitive), refusing any member v
// does not have, so that a misspelt one is said rather than ignored.
func decodeArgs(tool string, args json.RawMessage, v any, known ...string) error {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var members map[string]json.RawMessage
	if err := sdkwire.Decode(args, &members); err != nil {
		return fmt.Errorf("%s: the arguments are not a JSON object: %v", tool, err)
	}
	for k := range members {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%s: unknown argument %q (it takes %s)", tool, k, strings.Join(known, ", "))
		}
	}
	if err := sdkwire.Decode(args, v); err != nil {
		return fmt.Errorf("%s: %v", tool, err)
	}
	return nil
}

// visible reports which tools the caller of req may see in search and
// describe: all of them, or under auth.list: callable the ones it may call.
func (s *searchMode) visible(req *mcp.CallToolRequest) func(*Tool) bool {
	g := s.g
	if !g.listCallable() || req.Extra == nil || req.Extra.Header == nil {
		return func(*Tool) bool { return true }
	}
	may := g.mayCall(g.listKey()(req.Extra.TokenInfo))
	return func(t *Tool) bool { return may(t.Tool.Name) }
}

// card is one search_tools hit: enough to choose a tool, and to know
// whether calling it is read-only.
type card struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Hints are the hints the gateway's policy goes by (policyHints).
	Hints      hintCard               `json:"annotations"`
	Provenance annotations.Provenance `json:"provenance"`
	Upstream   string                 `json:"upstream"`
}

// hintCard is the four hints, always present.
type hintCard struct {
	ReadOnly    bool `json:"readOnlyHint"`
	Destructive bool `json:"destructiveHint"`
	Idempotent  bool `json:"idempotentHint"`
	OpenWorld   bool `json:"openWorldHint"`
}

func hintsOf(a *mcp.ToolAnnotations) hintCard {
	if a == nil {
		// MCP's defaults for a tool that says nothing.
		return hintCard{Destructive: true, OpenWorld: true}
	}
	h := hintCard{ReadOnly: a.ReadOnlyHint, Idempotent: a.IdempotentHint, Destructive: true, OpenWorld: true}
	if a.DestructiveHint != nil {
		h.Destructive = *a.DestructiveHint
	}
	if a.OpenWorldHint != nil {
		h.OpenWorld = *a.OpenWorldHint
	}
	if h.ReadOnly {
		h.Destructive = false // MCP: meaningful only when not read-only
	}
	return h
}

// untrustedHint is the provenance of a hint the gateway does not take
// from a federated tool's server.
const untrustedHint = "gateway: the upstream's claim is not trusted (no trust_hints, not in the lock): MCP's default"

// cardHints are the hints of t a card shows, with their provenance: the
// hints the gateway's policy goes by (policyHints), and for a federated
// tool whose server's claims it does not trust, MCP's defaults for the
// idempotent and open-world hints too (the gateway does not retry such a
// call either: federatedIdempotent), unless the configuration set them.
func (s *searchMode) cardHints(t *Tool) (hintCard, annotations.Provenance) {
	a := s.g.policyHints(t)
	h, p := hintsOf(a), t.Derived.Provenance
	if a == t.Tool.Annotations || t.Federated == nil {
		return h, p // trusted as served
	}
	if p.ReadOnly != "config" {
		p.ReadOnly = untrustedHint
	}
	if p.Destructive != "config" {
		h.Destructive, p.Destructive = !h.ReadOnly, untrustedHint
	}
	if p.Idempotent != "config" {
		h.Idempotent, p.Idempotent = false, untrustedHint
	}
	if p.OpenWorld != "config" {
		h.OpenWorld, p.OpenWorld = true, untrustedHint
	}
	return h, p
}

// firstSentence is a description's first sentence, at most maxCardText
// bytes (cut at a rune boundary, with an ellipsis).
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	for i := 0; i+1 < len(s); i++ {
		if (s[i] == '.' || s[i] == '!' || s[i] == '?') && s[i+1] == ' ' {
			s = s[:i+1]
			break
		}
	}
	if len(s) > maxCardText {
		cut := maxCardText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = strings.TrimSpace(s[:cut]) + "…"
	}
	return s
}

// searchArgs are search_tools' arguments.
type searchArgs struct {
	Query    string `json:"query"`
	Limit    *int   `json:"limit"`
	ReadOnly bool   `json:"read_only"`
	Upstream string `json:"upstream"`
}

func (s *searchMode) search(req *mcp.CallToolRequest, raw json.RawMessage) *mcp.CallToolResult {
	var a searchArgs
	if err := decodeArgs(metaSearch, raw, &a, "query", "limit", "read_only", "upstream"); err != nil {
		return toolError("%v", err)
	}
	switch {
	case strings.TrimSpace(a.Query) == "":
		return toolError("search_tools: query is required: say what the tool should do, e.g. \"list the open issues of a repository\"")
	case len(a.Query) > maxQueryBytes:
		return toolError("search_tools: query is %d bytes, at most %d", len(a.Query), maxQueryBytes)
	}
	limit := defaultSearchLimit
	if a.Limit != nil {
		if *a.Limit < 1 || *a.Limit > maxSearchLimit {
			return toolError("search_tools: limit %d is not between 1 and %d", *a.Limit, maxSearchLimit)
		}
		limit = *a.Limit
	}
	st := s.state.Load()
	visible := s.visible(req)
	if a.Upstream != "" {
		// The upstreams named are those with a tool the caller may see:
		// under auth.list: callable, no others, and no oracle for them.
		var names []string
		for _, t := range st.tools {
			if !slices.Contains(names, t.Upstream) && visible(t) {
				names = append(names, t.Upstream)
			}
		}
		if !slices.Contains(names, a.Upstream) {
			slices.Sort(names)
			return toolError("search_tools: no upstream named %q has tools for you (those that do: %s)", a.Upstream, strings.Join(names, ", "))
		}
	}
	keep := func(i int) bool {
		t := st.tools[i]
		if a.Upstream != "" && t.Upstream != a.Upstream {
			return false
		}
		if a.ReadOnly && !s.g.policyHints(t).ReadOnlyHint {
			return false
		}
		return visible(t)
	}
	hits := st.index.Search(a.Query, limit, keep)
	cards := make([]card, 0, len(hits))
	for _, h := range hits {
		t := st.tools[h.Doc]
		h, p := s.cardHints(t)
		cards = append(cards, card{
			Name:        t.Tool.Name,
			Title:       t.Tool.Title,
			Description: firstSentence(t.Tool.Description),
			Hints:       h,
			Provenance:  p,
			Upstream:    t.Upstream,
		})
	}
	return jsonResult(map[string]any{"tools": cards, "query": a.Query})
}

// jsonResult answers v as structured content and as its JSON text.
func jsonResult(v any) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return toolError("encoding the answer: %v", err)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}
}

// describeArgs are describe_tools' arguments.
type describeArgs struct {
	Names []string `json:"names"`
}

func (s *searchMode) describe(req *mcp.CallToolRequest, raw json.RawMessage) *mcp.CallToolResult {
	var a describeArgs
	if err := decodeArgs(metaDescribe, raw, &a, "names"); err != nil {
		return toolError("%v", err)
	}
	switch {
	case len(a.Names) == 0:
		return toolError("describe_tools: names is required: the names search_tools found")
	case len(a.Names) > maxDescribe:
		return toolError("describe_tools: %d names, at most %d", len(a.Names), maxDescribe)
	}
	st := s.state.Load()
	visible := s.visible(req)
	tools := []*mcp.Tool{}
	unknown := []string{}
	var found []string
	for _, n := range a.Names {
		t := st.byName[n]
		if t == nil || !visible(t) {
			unknown = append(unknown, n)
			continue
		}
		if slices.Contains(found, n) {
			continue
		}
		found = append(found, n)
		tools = append(tools, t.Tool)
	}
	if s.g.cfg.Stateful && req.Session != nil {
		s.addDescribed(req.Session, found)
	}
	return jsonResult(map[string]any{"tools": tools, "unknown": unknown})
}

// callArgs are the call meta-tools' arguments.
type callArgs struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// call runs a meta-call: the real tool's handler, under its name.
func (s *searchMode) call(ctx context.Context, meta string, req *mcp.CallToolRequest, raw json.RawMessage) *mcp.CallToolResult {
	var a callArgs
	if err := decodeArgs(meta, raw, &a, "name", "arguments"); err != nil {
		return toolError("%v", err)
	}
	if a.Name == "" {
		return toolError("%s: name is required: the tool to call, as search_tools names it", meta)
	}
	t := s.lookup(a.Name)
	if t == nil {
		return toolError("%s: unknown tool %q: search_tools finds the tools served", meta, a.Name)
	}
	if meta == metaCallReadOnly && !s.g.policyHints(t).ReadOnlyHint {
		s.g.logger.Info("search: call_read_only_tool refused a tool that is not read-only", "tool", t.Tool.Name, "upstream", t.Upstream)
		return toolError("call_read_only_tool: %s is not read-only (readOnlyHint from %s): nothing was sent; call it with call_tool", t.Tool.Name, cmpOr(t.Derived.Provenance.ReadOnly, "its server"))
	}
	var callerMeta mcp.Meta // the caller's progress token, among others
	if req.Params != nil {
		callerMeta = req.Params.Meta
	}
	real := &mcp.CallToolRequest{
		Session: req.Session,
		Params:  &mcp.CallToolParamsRaw{Meta: callerMeta, Name: t.Tool.Name, Arguments: a.Arguments},
		Extra:   req.Extra,
	}
	res, err := s.g.handler(t)(ctx, real)
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return toolError("%s: %s", t.Tool.Name, rpc.Message)
		}
		return toolError("%s: %v", t.Tool.Name, err)
	}
	// The mark goes on a copy: a handler's result may be shared (a
	// playbook run's, by every request that joined it).
	out := *res
	out.Meta = maps.Clone(res.Meta)
	if out.Meta == nil {
		out.Meta = mcp.Meta{}
	}
	out.Meta[MetaTool] = t.Tool.Name
	return &out
}

// lookup returns the tool served under name now.
func (s *searchMode) lookup(name string) *Tool {
	if len(s.g.federated) > 0 {
		t, _ := s.g.live.lookup(name)
		return t
	}
	return s.state.Load().byName[name]
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// metaCallTarget is the tool a meta-call of the message will run: for the
// step-up check, which must decide on the real tool. It reads params as
// peekCall does, arguments.name with the decoder the handler uses
// (decodeArgs); ok is false when the message is not a meta-call.
func metaCallTarget(tool string, params json.RawMessage) (string, bool) {
	if tool != metaCall && tool != metaCallReadOnly {
		return "", false
	}
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if !sdkwire.Parse(params, &p) || len(p.Arguments) == 0 {
		return "", false
	}
	var a struct {
		Name string `json:"name"`
	}
	if !sdkwire.Parse(p.Arguments, &a) || a.Name == "" {
		return "", false
	}
	return a.Name, true
}

// metaTools are the four meta-tools' definitions. Their hints are what
// they do whatever the tool: searching and describing read the catalog,
// call_read_only_tool runs only read-only tools (the reason a client may
// auto-approve it), call_tool may run anything.
func metaTools() map[string]*mcp.Tool {
	yes, no := new(true), new(false)
	prov := func(readOnly, destructive string) mcp.Meta {
		return mcp.Meta{MetaProvenance: annotations.Provenance{
			ReadOnly: readOnly, Destructive: destructive,
			Idempotent: "gateway: search meta-tool", OpenWorld: "gateway: search meta-tool", Title: "gateway: search meta-tool",
		}}
	}
	callSchema := json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"The tool's name, as search_tools gives it."},` +
		`"arguments":{"type":"object","description":"The tool's arguments, as describe_tools' inputSchema says."}},` +
		`"required":["name"],"additionalProperties":false}`)
	return map[string]*mcp.Tool{
		metaSearch: {
			Name:  metaSearch,
			Title: "Search tools",
			Description: "Find the tools that can do something. This gateway serves too many tools to list: " +
				"search by what you want done, in plain words. Each hit gives the tool's name, what it does and its hints " +
				"(readOnlyHint true: it only reads). Then describe_tools for its arguments, and call it with " +
				"call_read_only_tool (read-only tools) or call_tool.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"What the tool should do, e.g. \"list the open issues of a repository\"."},` +
				`"limit":{"type":"integer","minimum":1,"maximum":50,"default":8,"description":"At most this many tools."},` +
				`"read_only":{"type":"boolean","description":"Only tools that only read."},` +
				`"upstream":{"type":"string","description":"Only the tools of this upstream API."}},` +
				`"required":["query"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{Title: "Search tools", ReadOnlyHint: true, DestructiveHint: no, IdempotentHint: true, OpenWorldHint: no},
			Meta:        prov("gateway: reads the catalog", "gateway: reads the catalog"),
		},
		metaDescribe: {
			Name:        metaDescribe,
			Title:       "Describe tools",
			Description: "Get the whole definitions of tools by name (arguments, output, hints), to call them with call_read_only_tool or call_tool.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"names":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":50,"description":"The tools' names, as search_tools gives them."}},` +
				`"required":["names"],"additionalProperties":false}`),
			Annotations: &mcp.ToolAnnotations{Title: "Describe tools", ReadOnlyHint: true, DestructiveHint: no, IdempotentHint: true, OpenWorldHint: no},
			Meta:        prov("gateway: reads the catalog", "gateway: reads the catalog"),
		},
		metaCallReadOnly: {
			Name:  metaCallReadOnly,
			Title: "Call a read-only tool",
			Description: "Call a tool that only reads (readOnlyHint true in search_tools). " +
				"It refuses, sending nothing, any tool that is not read-only: use call_tool for those.",
			InputSchema: callSchema,
			Annotations: &mcp.ToolAnnotations{Title: "Call a read-only tool", ReadOnlyHint: true, DestructiveHint: no, IdempotentHint: false, OpenWorldHint: yes},
			Meta:        prov("gateway: refuses any tool whose trusted hints are not read-only", "gateway: runs read-only tools only"),
		},
		metaCall: {
			Name:        metaCall,
			Title:       "Call a tool",
			Description: "Call any tool by name, with its arguments. It may change or delete data: prefer call_read_only_tool for tools that only read.",
			InputSchema: callSchema,
			Annotations: &mcp.ToolAnnotations{Title: "Call a tool", ReadOnlyHint: false, DestructiveHint: yes, IdempotentHint: false, OpenWorldHint: yes},
			Meta:        prov("gateway: may run any tool", "gateway: may run any tool"),
		},
	}
}
