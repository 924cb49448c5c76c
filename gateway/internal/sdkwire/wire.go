package sdkwire

import (
	"bytes"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	sjson "github.com/segmentio/encoding/json"

	"github.com/mcpgate/mcpgate/upstream"
)

// pageToken is go-sdk's cursor (mcp/server.go, v1.8.0): the type's name and
// its field are part of the gob encoding, so both are as go-sdk spells them.
type pageToken struct {
	LastUID string
}

func EncodeCursor(uid string) (string, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(pageToken{LastUID: uid}); err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(buf.Bytes()), nil
}

// DecodeCursor is go-sdk's DecodeCursor: the last name a cursor names.
func DecodeCursor(cursor string) (string, bool) {
	b, err := base64.URLEncoding.DecodeString(cursor)
	if err != nil {
		return "", false
	}
	var tok pageToken
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&tok); err != nil {
		return "", false
	}
	return tok.LastUID, true
}

// Marshal is go-sdk's jsonMarshal: JSON without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Message is go-sdk's wireDecode (internal/jsonrpc2, v1.8.0), field for
// field, decoded with the same library and flags, so a message the fast path
// reads is the message go-sdk would have read, and one go-sdk could not
// decode is not answered here. One field differs: the id is kept as sent
// (go-sdk's is an any, which reads a number as a float64), so that a number
// a float64 does not hold exactly is known as such (see EchoID).
type Message struct {
	VersionTag string          `json:"jsonrpc"`
	ID         json.RawMessage `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error,omitempty"`
}

// Parse decodes as go-sdk's internal/json.Unmarshal does: segmentio's
// decoder, struct fields matched case-sensitively, at most MaxDepth deep.
func Parse(data []byte, v any) bool { return Decode(data, v) == nil }

// Decode is Parse, saying what failed.
func Decode(data []byte, v any) error {
	if !upstream.WithinDepth(data, MaxDepth) {
		return fmt.Errorf("nested more than %d levels deep", MaxDepth)
	}
	_, err := sjson.Parse(data, v, sjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// MaxDepth is go-sdk's defaultMaxDepth (internal/json).
const MaxDepth = 1000

// LocalLoopback reports whether r came in on a loopback address: go-sdk's
// test (IsLoopback of the local address), without formatting a TCP address
// per request.
func LocalLoopback(r *http.Request) bool {
	switch la := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		return la != nil && la.IP.IsLoopback()
	case net.Addr:
		return la != nil && IsLoopback(la.String())
	}
	return false
}

// IsLoopback is go-sdk's internal/util.IsLoopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// SDKAccept is the Accept header the MCP SDKs' clients send (TypeScript's
// and Go's), which Accepts need not split to allow.
const SDKAccept = "application/json, text/event-stream"

// Accepts is go-sdk's (mcp/streamable.go): whether Accept allows
// JSON and an event stream. A stateless POST needs both.
func Accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// MaxExactID bounds the numeric ids answered as sent: go-sdk reads a number
// as a float64 and answers int64(v), which is the number sent only for
// integers a float64 holds exactly.
const MaxExactID = 1 << 53

// EchoID returns the JSON of a request id as go-sdk's answer carries it, or
// false for a notification (no id, or null) and for ids go-sdk would not
// echo as sent (see ExactID), which the front door refuses.
func EchoID(raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	if raw[0] == '"' {
		var s string
		if !Parse(raw, &s) {
			return nil, false
		}
		b, err := Marshal(s)
		return b, err == nil
	}
	n, ok := ExactID(raw)
	if !ok {
		return nil, false
	}
	return strconv.AppendInt(nil, n, 10), true
}

// ExactID returns the value of an id that is a JSON number written as an
// integer within ±2^53: the numeric ids go-sdk answers as sent. (1.0 and 1e2
// are integers in value, but not in every client's JSON: Python reads them
// as floats.)
func ExactID(raw json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil && -MaxExactID <= n && n <= MaxExactID
}

// IDKey is a request id as go-sdk's jsonrpc2.MakeID reads it: a string as
// itself, a number as int64(v). False for no id (a notification) and for
// anything else (go-sdk refuses it).
func IDKey(id any) (string, bool) {
	switch v := id.(type) {
	case string:
		return "s" + v, true
	case float64:
		return "n" + strconv.FormatInt(int64(v), 10), true
	}
	return "", false
}

// IsJSON reports whether a Content-Type is application/json. Other types are
// left to go-sdk, which answers 415.
func IsJSON(contentType string) bool {
	if contentType == "application/json" {
		return true // what clients send; ParseMediaType allocates
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// WouldRead reports whether go-sdk would read r's message rather than
// refuse r first: it applies the checks go-sdk's StreamableHTTPHandler makes
// before it reads a stateless POST (v1.8.0, in its order): DNS-rebinding
// protection (a loopback listener only answers a loopback Host), the
// protocol version header, Content-Type, Accept, and no Last-Event-ID. A
// request that fails one goes to go-sdk, which refuses it in its own words.
// Cross-origin protection is not configured
// (StreamableHTTPOptions.CrossOriginProtection is nil in newMux), nor are
// sessions allowed in stateless mode (MCPGODEBUG turns the fast path off).
func WouldRead(r *http.Request, versions []string) bool {
	if r.Method != http.MethodPost {
		return false
	}
	if LocalLoopback(r) && !IsLoopback(r.Host) {
		return false
	}
	if !slices.Contains(versions, r.Header.Get("Mcp-Protocol-Version")) {
		return false
	}
	if !IsJSON(r.Header.Get("Content-Type")) {
		return false
	}
	if accept := r.Header["Accept"]; len(accept) != 1 || accept[0] != SDKAccept {
		if jsonOK, streamOK := Accepts(accept); !jsonOK || !streamOK {
			return false
		}
	}
	return len(r.Header.Values("Last-Event-ID")) == 0
}

// Answers as go-sdk writes them.

// The fast path answers application/json, never an event stream. A POST's
// answer may be either (the transport spec leaves the choice to the server,
// and every client must read both); go-sdk, without JSONResponse (newMux
// does not set it, so that the requests it serves can stream progress),
// sends one SSE "message" event. The fast path has nothing to stream — it
// hands calls with a progressToken to go-sdk — so it sends the one message
// as it is: no event framing for either side to write and parse, and the
// headers go-sdk sets on a JSON answer. TestFastPathDifferential compares
// the messages. Worth 4–6% of throughput at c=8 (mcpgate-bench, same run).
var (
	noCacheControl  = []string{"no-cache, no-transform"}
	jsonContentType = []string{"application/json"}
)

// WriteResult answers a request with result. A large result (a tools/list
// page) is written as it is, not copied.
func WriteResult(w http.ResponseWriter, id, result []byte) {
	buf := GetBuffer()
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	buf.WriteString(`,"result":`)
	if len(result) > MaxPooledBuffer/4 {
		SetJSONHeader(w)
		w.Write(buf.Bytes())
		w.Write(result)
		w.Write(closeBrace)
		PutBuffer(buf)
		return
	}
	buf.Write(result)
	buf.WriteByte('}')
	WriteJSON(w, buf)
}

var closeBrace = []byte("}")

// WriteError answers a request with a JSON-RPC error, as go-sdk's wire form
// (jsonrpc2.WireError, no data), with status 200 as go-sdk does.
func WriteError(w http.ResponseWriter, id []byte, code int64, message string) {
	buf := GetBuffer()
	AppendError(buf, id, code, message)
	WriteJSON(w, buf)
}

// AppendError writes to buf a JSON-RPC error answer to request id, as
// go-sdk's wire form has it (jsonrpc2.WireError, no data): the one shape
// every transport's fast path answers an error in.
func AppendError(buf *bytes.Buffer, id []byte, code int64, message string) {
	msg, _ := Marshal(message)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	buf.WriteString(`,"error":{"code":`)
	buf.WriteString(strconv.FormatInt(code, 10))
	buf.WriteString(`,"message":`)
	buf.Write(msg)
	buf.WriteString("}}")
}

// WriteJSON sends buf as the answer and returns it to the pool. The answer
// is not flushed: net/http sends it with a Content-Length when it fits its
// buffer.
func WriteJSON(w http.ResponseWriter, buf *bytes.Buffer) {
	SetJSONHeader(w)
	w.Write(buf.Bytes())
	PutBuffer(buf)
}

// SetJSONHeader sets what go-sdk sets on a JSON answer; the slices are
// shared, never modified.
func SetJSONHeader(w http.ResponseWriter) {
	h := w.Header()
	h["Cache-Control"] = noCacheControl
	h["Content-Type"] = jsonContentType
}

// MaxPooledBuffer bounds the buffers kept for reuse: one answer of a large
// tools/list must not pin megabytes for the life of the process.
const MaxPooledBuffer = 64 << 10

var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func GetBuffer() *bytes.Buffer { return bufferPool.Get().(*bytes.Buffer) }

func PutBuffer(b *bytes.Buffer) {
	if b.Cap() > MaxPooledBuffer {
		return
	}
	b.Reset()
	bufferPool.Put(b)
}

// InitializeProblem returns what keeps go-sdk from decoding an initialize
// request's params, in go-sdk's words for other methods, or "" when they
// decode. Both transports answer it with -32602 (the front door and stdio).
func InitializeProblem(params json.RawMessage) string {
	const lead = "handling 'initialize': invalid params: "
	if params = bytes.TrimSpace(params); len(params) == 0 || string(params) == "null" {
		return lead + `missing required "params"`
	}
	var p initializeParams
	if err := Decode(params, &p); err != nil {
		return lead + err.Error()
	}
	return ""
}

// initializeParams has the shape go-sdk v1.8.0 decodes an initialize's
// params into (its unexported initializeParamsV2: capabilities.roots a
// pointer).
type initializeParams struct {
	mcp.InitializeParams
	Capabilities *struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	} `json:"capabilities"`
}
