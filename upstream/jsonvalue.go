package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	sjson "github.com/segmentio/encoding/json"
)

// maxJSONDepth bounds the nesting of the JSON the gateway decodes into
// values — tool arguments and upstream answers — as encoding/json does
// (10000): segmentio's decoder recurses without a bound, and a hostile
// answer of a few megabytes of "[" would otherwise exhaust the stack.
const maxJSONDepth = 10000

// decodeJSON decodes one JSON value, numbers as json.Number (exact, as the
// schema validator wants them), and refuses data after it and nesting past
// maxJSONDepth.
//
// It uses segmentio's decoder, the one go-sdk reads every message with,
// rather than encoding/json: 17-35% less time and 40-65% less memory per
// value (BenchmarkDecodeJSON); a tool call decodes two, its arguments and
// the upstream's answer. Both replace bytes that are not UTF-8, and lone
// surrogates, with U+FFFD, and keep the last of duplicate keys
// (TestDecodeJSONAgreesWithEncodingJSON).
func decodeJSON(data []byte) (any, error) {
	if !WithinDepth(data, maxJSONDepth) {
		return nil, fmt.Errorf("nested more than %d levels deep", maxJSONDepth)
	}
	var v any
	rest, err := sjson.Parse(data, &v, sjson.UseNumber)
	if err != nil {
		return nil, stdSyntaxError(data, err)
	}
	if len(bytes.TrimLeft(rest, " \t\r\n")) > 0 { // JSON's white space, not Unicode's
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// stdSyntaxError is encoding/json's word for what is wrong with data
// ("unexpected EOF", "invalid character 'x' looking for beginning of
// value"), which names the problem without quoting the input back, as
// segmentio's does; err when encoding/json finds nothing wrong.
func stdSyntaxError(data []byte, err error) error {
	var v any
	if stdErr := json.Unmarshal(data, &v); stdErr != nil {
		if errors.Is(stdErr, io.ErrUnexpectedEOF) || strings.HasPrefix(stdErr.Error(), "unexpected end of JSON input") {
			return io.ErrUnexpectedEOF
		}
		return stdErr
	}
	return err
}

// WithinDepth reports whether the arrays and objects of data nest at most
// max deep: a scan that counts brackets outside strings (go-sdk's
// checkMaxDepth). It does not check that data is JSON.
func WithinDepth(data []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				return false
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return true
}

// decodedSize estimates, from above, the memory decodeJSON allocates to
// decode data: the values, maps and slices it makes, and the garbage of
// growing them. A scan, without decoding: a call counts the estimate against
// its ResponseBudget before it decodes an answer to check it against the
// tool's output schema (issue 20: 16 answers of 4 MB, decoded at once,
// took the heap to 450 MB where the budget held 64 MiB of them). The
// figures per token are segmentio's allocations measured on the shapes
// that decode to the most (TestDecodedSize): an object 256 bytes, an array
// 192, a member or element 64, a string 32 besides its bytes, every other
// byte one; and a sixteenth more. A listing decodes to about 7 bytes a
// byte, an array of empty arrays to 79; the estimates are 14 and 91.
func decodedSize(data []byte) int64 {
	var n int64
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			n++
			continue
		}
		switch b {
		case '"':
			inString = true
			n += 32
		case '{':
			n += 256
		case '[':
			n += 192
		case ':', ',':
			n += 64
		default:
			n++
		}
	}
	return n + n/16 // allocations are rounded up to size classes and pages
}
