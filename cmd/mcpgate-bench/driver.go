package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The load driver speaks Streamable HTTP the way an MCP client does: JSON-RPC
// over POST, an answer either application/json or text/event-stream (whose
// `data:` lines it reads), its own initialize per worker (keeping
// Mcp-Session-Id when the server gives one) followed by
// notifications/initialized, request ids restarting at 1 per worker. Every
// call carries a value no other call carries, and every answer is checked to
// hold that value and the call's own id: an answer that does not is counted
// as a "wrong-client answer" — the bug a gateway that mixes up concurrent
// callers would have.

// op is one kind of call.
type op uint8

const (
	opGet      op = iota // tools/call getItem (or, against the REST target, GET /items/{id})
	opList               // tools/list
	opCreate             // tools/call createItem: a write
	opFail               // tools/call failItem: the upstream answers 500, so isError is expected
	opSlow               // tools/call slowItem: the upstream answers after a delay
	opPlaybook           // tools/call demo_fast, the example engine's playbook (the playbook and noetl targets)
)

// modes maps a mode name to the cycle of operations each worker repeats.
// mixed is one list, one write, one upstream failure, one slow read and six
// reads in ten calls.
var modes = map[string][]op{
	"call":  {opGet},
	"list":  {opList},
	"mixed": {opList, opGet, opCreate, opGet, opFail, opGet, opSlow, opGet, opGet, opGet},
}

// target is one server under load.
type target struct {
	name string
	rest bool   // plain REST: GET url/items/{id}?q=..., no MCP
	url  string // the MCP endpoint (…/mcp), or the REST base URL
	proc *proc  // the process whose CPU is charged to the target
	up   *proc  // the upstream behind it (nil for the REST target itself)
	// handshakes, when set, is the go-sdk server role whose handshakes
	// (GET /_count) are counted over the measured window.
	handshakes *proc
	// stdio, when set, is the `mcpgate stdio` child the calls go to (one
	// session, opened when it started), instead of url.
	stdio *stdioClient
	// playbook: the target's calls are the playbook tool demo_fast
	// (opPlaybook) instead of getItem.
	playbook bool
}

// loadSpec is one run: a target, a concurrency, a mode and its timing.
type loadSpec struct {
	target   *target
	c        int
	mode     string
	warmup   time.Duration
	duration time.Duration
	protocol string // MCP protocol version the workers ask for
	listSize int    // tools expected in tools/list; 0: any number > 0
	// sample, when set, is called about once a second while measuring.
	sample func()
}

// result is what one run measured. Calls are those started while measuring.
type result struct {
	target, mode     string
	c                int
	calls            int
	elapsed          time.Duration
	lat              []time.Duration // sorted
	errors, wrong    int
	expectedErrors   int // isError answers to failItem, as expected
	firstErr         string
	firstWrong       string
	targetCPU, upCPU time.Duration // of the target and its upstream, while measuring
	driverCPU        time.Duration // of this process, while measuring
	allocBytes       float64       // target's go_memstats_alloc_bytes_total delta; <0: not measured
	hasUp            bool          // an upstream process is behind the target
	handshakes       int64         // upstream handshakes while measuring; <0: not counted
	respBytes        int           // size of one answer (the last measured)
	listTools        int           // tools in the last tools/list answer
}

func (r *result) rate() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// pct is the p-th quantile latency (nearest rank).
func (r *result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[int(p*float64(len(r.lat)-1)+0.5)]
}

// perCall is d per measured call, in µs.
func (r *result) perCall(d time.Duration) float64 {
	if r.calls == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(r.calls)
}

// phases of a run, read by the workers.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// worker is one client: its own connection(s), session and ids.
type worker struct {
	n       int
	spec    *loadSpec
	client  *http.Client
	hdr     http.Header // reused: the transport never writes to it
	session string
	nextID  int64
	body    []byte       // the request body, rebuilt in place per call
	resp    bytes.Buffer // the answer, reused
	tok     []byte       // this call's unique value
	ops     []op

	lat                            []time.Duration
	calls, errors, wrong, expected int
	firstErr, firstWrong           string
	respBytes, listTools           int // of the last measured answer, the last tools/list
}

// runLoad drives spec.target with spec.c workers: warm-up, then measure.
func runLoad(ctx context.Context, spec *loadSpec) (*result, error) {
	ops, ok := modes[spec.mode]
	if !ok {
		return nil, fmt.Errorf("mode %q: want call, list or mixed", spec.mode)
	}
	if spec.target.rest && spec.mode != "call" {
		return nil, fmt.Errorf("the REST target serves mode call only")
	}
	// Enough idle connections that every worker keeps its own: the driver
	// must not be what limits the rate (nor pay for new connections).
	tr := &http.Transport{
		MaxIdleConns:        spec.c + 16,
		MaxIdleConnsPerHost: spec.c + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}

	workers := make([]*worker, spec.c)
	var wg sync.WaitGroup
	initErrs := make([]error, spec.c)
	for i := range workers {
		wops := ops
		if spec.target.playbook {
			wops = []op{opPlaybook} // mode call only (runBench)
		}
		w := &worker{n: i + 1, spec: spec, client: client, nextID: 1, ops: wops,
			body: make([]byte, 0, 512), lat: make([]time.Duration, 0, 1<<14)}
		w.hdr = http.Header{
			"Content-Type": {"application/json"},
			"Accept":       {"application/json, text/event-stream"},
		}
		workers[i] = w
		if spec.target.stdio != nil {
			w.nextID = stdioIDBase(w.n) // one session: the stdio client opened it
			continue
		}
		if spec.target.rest {
			continue
		}
		wg.Go(func() { initErrs[i] = w.initialize(ctx) })
	}
	wg.Wait()
	if err := errors.Join(initErrs...); err != nil {
		return nil, fmt.Errorf("%s: initialize: %v", spec.target.name, err)
	}

	var phase atomic.Int32
	for _, w := range workers {
		wg.Go(func() { w.loop(ctx, &phase) })
	}
	sleep(ctx, spec.warmup)

	res := &result{target: spec.target.name, mode: spec.mode, c: spec.c, allocBytes: -1, handshakes: -1, hasUp: spec.target.up != nil}
	cpu0, up0 := spec.target.proc.cpu0(), spec.target.up.cpu0()
	self0, _ := procCPU(os.Getpid())
	alloc0, allocOK := targetAlloc(spec.target)
	hs0, hsErr := spec.target.handshakeCount()
	start := time.Now()
	phase.Store(phaseMeasure)
	for end := start.Add(spec.duration); ctx.Err() == nil; {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		sleep(ctx, min(left, time.Second))
		if spec.sample != nil && time.Until(end) > 0 {
			spec.sample()
		}
	}
	phase.Store(phaseStop)
	res.elapsed = time.Since(start)
	res.targetCPU = spec.target.proc.cpu0() - cpu0
	res.upCPU = spec.target.up.cpu0() - up0
	self1, _ := procCPU(os.Getpid())
	res.driverCPU = self1 - self0
	if alloc1, ok := targetAlloc(spec.target); ok && allocOK {
		res.allocBytes = alloc1 - alloc0
	}
	if hs1, err := spec.target.handshakeCount(); err == nil && hsErr == nil {
		res.handshakes = hs1 - hs0
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Close the sessions, as a client going away does, so that a stateful
	// server does not carry them into the next run (or the soak's readings).
	for _, w := range workers {
		if w.hdr.Get("Mcp-Session-Id") != "" {
			wg.Go(func() { w.closeSession(ctx) })
		}
	}
	wg.Wait()

	for _, w := range workers {
		res.lat = append(res.lat, w.lat...)
		res.calls += w.calls
		res.errors += w.errors
		res.wrong += w.wrong
		res.expectedErrors += w.expected
		res.respBytes = max(res.respBytes, w.respBytes)
		res.listTools = max(res.listTools, w.listTools)
		if res.firstErr == "" {
			res.firstErr = w.firstErr
		}
		if res.firstWrong == "" {
			res.firstWrong = w.firstWrong
		}
	}
	slices.Sort(res.lat)
	return res, nil
}

// cpu0 is the process's CPU time, 0 for no process or when /proc cannot say.
func (p *proc) cpu0() time.Duration {
	if p == nil {
		return 0
	}
	d, _ := p.cpu()
	return d
}

// handshakeCount is the handshakes the target's go-sdk server role has
// answered so far; an error when the target has none.
func (t *target) handshakeCount() (int64, error) {
	if t.handshakes == nil {
		return 0, errors.New("no handshake counter")
	}
	return handshakes(t.handshakes.url)
}

// targetAlloc is the bytes the target process has allocated so far, from its
// /metrics (go_memstats_alloc_bytes_total, a client_golang default).
func targetAlloc(t *target) (float64, bool) {
	p := t.proc // for the direct target, the upstream itself
	if p == nil {
		return 0, false
	}
	m, ok := scrapeMetrics(p.url)
	if !ok {
		return 0, false
	}
	v, ok := m["go_memstats_alloc_bytes_total"]
	return v, ok
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// initialize opens the worker's MCP session: initialize with id 1, then
// notifications/initialized.
func (w *worker) initialize(ctx context.Context) error {
	w.body = fmt.Appendf(w.body[:0], `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"mcpgate-bench","version":"1"}}}`, w.nextID, w.spec.protocol)
	resp, err := w.post(ctx)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("worker %d: initialize: HTTP %d: %.200s", w.n, resp.StatusCode, w.resp.Bytes())
	}
	msg, err := findAnswer(resp.Header.Get("Content-Type"), w.resp.Bytes())
	if err != nil {
		return fmt.Errorf("worker %d: initialize: %v", w.n, err)
	}
	var a struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
		Error *rpcError `json:"error"`
	}
	if err := json.Unmarshal(msg, &a); err != nil || a.Result == nil {
		return fmt.Errorf("worker %d: initialize: not a result: %.200s", w.n, msg)
	}
	if string(bytes.TrimSpace(a.ID)) != "1" {
		return fmt.Errorf("worker %d: initialize: answer has id %s, want 1", w.n, a.ID)
	}
	w.nextID++
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		w.hdr.Set("Mcp-Session-Id", sid)
	}
	w.hdr.Set("Mcp-Protocol-Version", a.Result.ProtocolVersion)
	w.body = append(w.body[:0], `{"jsonrpc":"2.0","method":"notifications/initialized"}`...)
	resp, err = w.post(ctx)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("worker %d: notifications/initialized: HTTP %d, want 202", w.n, resp.StatusCode)
	}
	return nil
}

// closeSession ends the worker's session with DELETE (Streamable HTTP).
// The answer is not checked: a server may refuse it (405) by the spec.
func (w *worker) closeSession(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, w.spec.target.url, nil)
	if err != nil {
		return
	}
	req.Header = w.hdr
	w.do(req)
}

// post sends w.body and reads the whole answer into w.resp.
func (w *worker) post(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.spec.target.url, bytes.NewReader(w.body))
	if err != nil {
		return nil, err
	}
	req.Header = w.hdr
	return w.do(req)
}

func (w *worker) do(req *http.Request) (*http.Response, error) {
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, err
	}
	w.resp.Reset()
	_, err = w.resp.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp, err
}

func (w *worker) loop(ctx context.Context, phase *atomic.Int32) {
	for i := 0; ctx.Err() == nil; i++ {
		p := phase.Load()
		if p == phaseStop {
			return
		}
		o := w.ops[i%len(w.ops)]
		id := w.nextID
		w.nextID++
		start := time.Now()
		resp, err := w.call(ctx, o, id)
		lat := time.Since(start)
		if p != phaseMeasure {
			continue
		}
		w.calls++
		w.lat = append(w.lat, lat)
		var out outcome
		if err != nil {
			out = outcome{kind: outError, msg: err.Error()}
		} else {
			out = w.check(o, id, resp)
		}
		w.respBytes = w.resp.Len()
		if out.tools > 0 {
			w.listTools = out.tools
		}
		switch out.kind {
		case outError:
			w.errors++
			if w.firstErr == "" {
				w.firstErr = fmt.Sprintf("worker %d call %d: %s", w.n, id, out.msg)
			}
		case outWrong:
			w.wrong++
			if w.firstWrong == "" {
				w.firstWrong = fmt.Sprintf("worker %d call %d: %s", w.n, id, out.msg)
			}
		case outExpectedError:
			w.expected++
		}
	}
}

// call sends one operation with id; its unique value is "w<worker>-<id>".
func (w *worker) call(ctx context.Context, o op, id int64) (*http.Response, error) {
	w.tok = strconv.AppendInt(append(strconv.AppendInt(append(w.tok[:0], 'w'), int64(w.n), 10), '-'), id, 10)
	if w.spec.target.rest {
		u := make([]byte, 0, len(w.spec.target.url)+64)
		u = append(append(append(append(append(u, w.spec.target.url...), "/items/"...), w.tok...), "?q=q"...), w.tok...)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, string(u), nil)
		if err != nil {
			return nil, err
		}
		return w.do(req)
	}
	b := append(w.body[:0], `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	switch o {
	case opList:
		b = append(b, `,"method":"tools/list"}`...)
	case opGet, opSlow:
		name := toolGet
		if o == opSlow {
			name = toolSlow
		}
		b = append(append(append(b, `,"method":"tools/call","params":{"name":"`...), name...), `","arguments":{"id":"`...)
		b = append(append(append(b, w.tok...), `","q":"q`...), w.tok...)
		b = append(b, `"}}}`...)
	case opCreate:
		b = append(b, `,"method":"tools/call","params":{"name":"createItem","arguments":{"name":"n`...)
		b = append(append(b, w.tok...), `"}}}`...)
	case opFail:
		b = append(b, `,"method":"tools/call","params":{"name":"failItem","arguments":{}}}`...)
	case opPlaybook:
		b = append(b, `,"method":"tools/call","params":{"name":"`+playbookTool+`","arguments":{"name":"`...)
		b = append(append(b, w.tok...), `"}}}`...)
	}
	w.body = b
	if w.spec.target.stdio != nil {
		return w.postStdio(ctx, id)
	}
	return w.post(ctx)
}

type outcomeKind uint8

const (
	outOK outcomeKind = iota
	outError
	outWrong
	outExpectedError
)

type outcome struct {
	kind  outcomeKind
	msg   string
	tools int // tools in a tools/list answer
}

func (w *worker) check(o op, id int64, resp *http.Response) outcome {
	body := w.resp.Bytes()
	if resp.StatusCode != http.StatusOK {
		return outcome{kind: outError, msg: fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body)}
	}
	if w.spec.target.rest {
		return checkEcho(body, string(w.tok), "q"+string(w.tok))
	}
	if o == opPlaybook {
		return checkPlaybook(resp.Header.Get("Content-Type"), body, id, string(w.tok))
	}
	return checkAnswer(o, resp.Header.Get("Content-Type"), body, id, string(w.tok), w.spec.listSize)
}

// rpcAnswer is the part of a JSON-RPC answer the checks read.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []textContent   `json:"content"`
		Tools             []struct {
			Name string `json:"name"`
		} `json:"tools"`
	} `json:"result"`
	Error *rpcError `json:"error"`
}

// checkAnswer checks one MCP answer to the call with id whose unique value
// is tok: it must carry id, and (for a read or a write) tok. An answer with
// another id, or another call's value, is a wrong-client answer.
func checkAnswer(o op, contentType string, body []byte, id int64, tok string, listSize int) outcome {
	msg, err := findAnswer(contentType, body)
	if err != nil {
		return outcome{kind: outError, msg: err.Error()}
	}
	var a rpcAnswer
	if err := json.Unmarshal(msg, &a); err != nil {
		return outcome{kind: outError, msg: fmt.Sprintf("answer is not JSON-RPC: %v: %.200s", err, msg)}
	}
	if got := string(bytes.TrimSpace(a.ID)); got != strconv.FormatInt(id, 10) {
		return outcome{kind: outWrong, msg: fmt.Sprintf("answer has id %s, want %d", got, id)}
	}
	if a.Error != nil {
		return outcome{kind: outError, msg: fmt.Sprintf("JSON-RPC error %d: %s", a.Error.Code, a.Error.Message)}
	}
	if a.Result == nil {
		return outcome{kind: outError, msg: "answer has neither result nor error"}
	}
	r := a.Result
	switch o {
	case opList:
		if len(r.Tools) == 0 || listSize > 0 && len(r.Tools) != listSize {
			return outcome{kind: outError, msg: fmt.Sprintf("tools/list has %d tools, want %d", len(r.Tools), listSize)}
		}
		return outcome{tools: len(r.Tools)}
	case opFail:
		if !r.IsError {
			return outcome{kind: outError, msg: "failItem: the upstream answered 500 but the result is not isError"}
		}
		return outcome{kind: outExpectedError}
	}
	if r.IsError {
		text := ""
		if len(r.Content) > 0 {
			text = r.Content[0].Text
		}
		return outcome{kind: outError, msg: fmt.Sprintf("isError: %.200s", text)}
	}
	sc := []byte(r.StructuredContent)
	if len(sc) == 0 && len(r.Content) > 0 {
		sc = []byte(r.Content[0].Text) // no outputSchema: the text is the upstream's JSON
	}
	if o == opCreate {
		var c struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(sc, &c); err != nil {
			return outcome{kind: outError, msg: fmt.Sprintf("createItem: answer is not the upstream's JSON: %.200s", sc)}
		}
		if c.Name != "n"+tok {
			return outcome{kind: outWrong, msg: fmt.Sprintf("createItem answer names %q, want %q", c.Name, "n"+tok)}
		}
		return outcome{}
	}
	return checkEcho(sc, tok, "q"+tok)
}

// checkEcho checks the upstream's echo {"id","q"} of one read.
func checkEcho(b []byte, id, q string) outcome {
	var e struct {
		ID string `json:"id"`
		Q  string `json:"q"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return outcome{kind: outError, msg: fmt.Sprintf("answer is not the upstream's echo: %.200s", b)}
	}
	if e.ID != id || e.Q != q {
		return outcome{kind: outWrong, msg: fmt.Sprintf("answer echoes id %q q %q, want %q %q", e.ID, e.Q, id, q)}
	}
	return outcome{}
}

// findAnswer returns the JSON-RPC answer in a body: the body itself for
// application/json; for text/event-stream, the first event whose data is a
// response (it has an id and no method), skipping notifications and
// requests the server sends first.
func findAnswer(contentType string, body []byte) ([]byte, error) {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, errors.New("empty answer")
		}
		return body, nil
	}
	events := sseData(body)
	if len(events) == 1 {
		return events[0], nil // the usual case: no need to parse it twice
	}
	for _, data := range events {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(data, &m) == nil && m.ID != nil && m.Method == "" {
			return data, nil
		}
	}
	return nil, fmt.Errorf("event stream holds no JSON-RPC answer: %.200s", body)
}

// sseData splits a text/event-stream body into the data of its events: the
// `data:` lines of an event joined by "\n" (one space after the colon is
// dropped), events ending at a blank line. Other fields are ignored.
func sseData(body []byte) [][]byte {
	var out [][]byte
	var cur []byte
	have := false
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			if have {
				out = append(out, cur)
			}
			cur, have = nil, false
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if have {
				cur = append(cur, '\n')
			}
			cur = append(cur, v...)
			have = true
		}
	}
	if have {
		out = append(out, cur)
	}
	return out
}
