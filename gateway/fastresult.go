package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// plainResult reports whether answerWriter.callResult can write res: the
// shape every REST tool result has — text contents (no annotations or
// _meta), structuredContent as the upstream's own bytes (json.RawMessage,
// already validated by upstream.passJSON, or upstream.WrappedJSON) or
// absent, isError, and a _meta of its own (a cut answer's). Any other
// shape the caller marshals with go-sdk's CallToolResult.MarshalJSON.
//
// Why by hand: CallToolResult.MarshalJSON goes through encoding/json's
// reflection, and re-scans (compacts) the RawMessage it passes through; on
// BenchmarkToolsCall/fast that was 11% of a call's CPU. And it holds the
// whole answer, encoded, beside the result while it is written, where
// answerWriter holds a few KiB (issue 20). TestAppendCallResult checks the
// output parses to what MarshalJSON gives, for hostile strings too.
func plainResult(res *mcp.CallToolResult) bool {
	switch sc := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		if len(sc) == 0 || sc[0] != '{' {
			return false
		}
	case upstream.WrappedJSON:
		if len(sc) == 0 {
			return false
		}
	default:
		return false
	}
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok || tc.Meta != nil || tc.Annotations != nil {
			return false
		}
	}
	return true
}

// appendCallResult writes res into buf as answerWriter.callResult does, or
// reports false, having written nothing, when res is not a plainResult.
func appendCallResult(buf *bytes.Buffer, res *mcp.CallToolResult) bool {
	if !plainResult(res) {
		return false
	}
	a := answerWriter{buf: buf}
	return a.callResult(res)
}

// Bounds of what answerWriter holds.
const (
	// flushAt is the size from which its buffer is handed to the
	// connection.
	flushAt = 16 << 10
	// escapeSpan is how much of a long string it escapes at a time, before
	// it looks at its buffer again: escaped, at most 6 times as much. The
	// buffer then stays within sdkwire.MaxPooledBuffer, and goes back to the pool.
	escapeSpan = 4 << 10
)

// answerWriter writes a JSON answer through buf, which it hands to w
// whenever buf holds flushAt bytes or more: writing an answer then holds
// buf's few KiB besides the result, whatever the answer's size, rather than
// the whole answer encoded (the text content JSON-escaped, and the
// structuredContent). An answer smaller than flushAt goes in one write, as
// before. With a nil w, everything stays in buf.
type answerWriter struct {
	buf *bytes.Buffer
	w   io.Writer
	err error // the first failed write: the rest of the answer is dropped
}

// flush hands what buf holds to w.
func (a *answerWriter) flush() {
	if a.w == nil {
		return
	}
	if a.err == nil && a.buf.Len() > 0 {
		_, a.err = a.w.Write(a.buf.Bytes())
	}
	a.buf.Reset()
}

// spill flushes buf once it holds flushAt bytes.
func (a *answerWriter) spill() {
	if a.w != nil && a.buf.Len() >= flushAt {
		a.flush()
	}
}

// callResult writes res, a plainResult. It reports false, having written
// nothing, when res's _meta cannot be marshaled.
func (a *answerWriter) callResult(res *mcp.CallToolResult) bool {
	var meta []byte
	if len(res.Meta) > 0 {
		var err error
		if meta, err = json.Marshal(res.Meta); err != nil {
			return false
		}
	}
	a.buf.WriteByte('{')
	if meta != nil {
		a.buf.WriteString(`"_meta":`)
		a.buf.Write(meta)
		a.buf.WriteByte(',')
	}
	a.buf.WriteString(`"content":[`)
	for i, c := range res.Content {
		if i > 0 {
			a.buf.WriteByte(',')
		}
		a.buf.WriteString(`{"type":"text","text":`)
		a.str(c.(*mcp.TextContent).Text)
		a.buf.WriteByte('}')
	}
	a.buf.WriteByte(']')
	switch sc := res.StructuredContent.(type) {
	case json.RawMessage:
		a.buf.WriteString(`,"structuredContent":`)
		a.raw(sc)
	case upstream.WrappedJSON:
		a.buf.WriteString(`,"structuredContent":{"result":`)
		a.raw(sc)
		a.buf.WriteByte('}')
	}
	if res.IsError {
		a.buf.WriteString(`,"isError":true`)
	}
	a.buf.WriteByte('}')
	return true
}

// raw writes p, valid JSON, without its line breaks, as the upstream sent it
// otherwise. A line break in valid JSON is white space outside strings
// (inside one it is escaped), so dropping them keeps the value, and the
// answer fits an SSE data line should it ever be sent as one. A long run
// between line breaks is written to w as it is, not copied.
func (a *answerWriter) raw(p []byte) {
	for len(p) > 0 {
		seg := p
		i := bytes.IndexAny(p, "\r\n")
		if i >= 0 {
			seg = p[:i]
		}
		if a.w != nil && len(seg) >= flushAt {
			a.flush()
			if a.err == nil {
				_, a.err = a.w.Write(seg)
			}
		} else {
			a.buf.Write(seg)
			a.spill()
		}
		if i < 0 {
			return
		}
		p = p[i+1:]
	}
}

// str writes s as a JSON string (see appendJSONString), a long one
// escapeSpan bytes at a time.
func (a *answerWriter) str(s string) {
	if a.w == nil || len(s) <= escapeSpan {
		appendJSONString(a.buf, s)
		a.spill()
		return
	}
	a.buf.WriteByte('"')
	for len(s) > escapeSpan {
		i := runeCut(s, escapeSpan)
		appendEscaped(a.buf, s[:i])
		s = s[i:]
		a.spill()
	}
	appendEscaped(a.buf, s)
	a.buf.WriteByte('"')
	a.spill()
}

// runeCut returns where to cut s near i, at or before it, so that each part
// escapes as it would within s: where a decoder reading s from its start
// begins a rune (or an invalid byte). That is any byte that does not
// continue a multi-byte sequence, and also i itself when the UTFMax bytes up
// to it all do: a sequence has at most UTFMax-1 continuation bytes, so the
// decoder reads the one at i as an invalid byte of its own.
func runeCut(s string, i int) int {
	for j := i; j > i-utf8.UTFMax; j-- {
		if s[j]&0xC0 != 0x80 {
			return j
		}
	}
	return i
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does), U+2028 and U+2029 escaped so the line is safe in a JavaScript
// context; everything else, HTML characters included, as it is.
func appendJSONString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	appendEscaped(buf, s)
	buf.WriteByte('"')
}

// appendEscaped writes s escaped as appendJSONString does, without the
// quotes.
func appendEscaped(buf *bytes.Buffer, s string) {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				buf.WriteByte('\\')
				buf.WriteByte(c)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf.WriteString(s[start:i])
			buf.WriteString(`\u202`)
			buf.WriteByte(hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
}
