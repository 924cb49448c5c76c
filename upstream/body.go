package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

type bodyBinding struct {
	mediaType  string // what is sent as Content-Type
	contentKey string // the requestBody content entry it came from
	// whole means the body is the single argument "body" (the request body
	// schema is not an object with properties); otherwise the body is an object
	// built from the arguments in props.
	whole    bool
	props    []bodyProp
	required bool
	// encoding of multipart/form parts: property → content type.
	partTypes map[string]string
}

// bodyProp is one body property and the argument that carries it.
type bodyProp struct{ arg, name string }

// bodyArg is the argument that carries a whole request body.
const bodyArg = "body"

// mediaRank orders the request body media types the gateway can send,
// best first; -1 for one it cannot.
func mediaRank(mt string) int {
	switch {
	case mt == "application/json":
		return 0
	case strings.HasSuffix(mt, "+json"):
		return 1
	case mt == "application/x-www-form-urlencoded":
		return 2
	case mt == "multipart/form-data":
		return 3
	case strings.HasPrefix(mt, "text/"):
		return 4
	case mt == "application/octet-stream":
		return 5
	case mt == "*/*" || mt == "application/*":
		return 6
	}
	return -1
}

func pickBody(op *openapi3.Operation) (*bodyBinding, *openapi3.Schema) {
	if op.RequestBody == nil || op.RequestBody.Value == nil || len(op.RequestBody.Value.Content) == 0 {
		return nil, nil
	}
	rb := op.RequestBody.Value
	best, bestRank := "", 99
	for mt := range rb.Content {
		if r := mediaRank(normalizeMedia(mt)); r >= 0 && (r < bestRank || (r == bestRank && mt < best)) {
			best, bestRank = mt, r
		}
	}
	if best == "" {
		return nil, nil
	}
	media := rb.Content[best]
	bb := &bodyBinding{mediaType: normalizeMedia(best), contentKey: best, required: rb.Required}
	var schema *openapi3.Schema
	if media != nil && media.Schema != nil {
		schema = media.Schema.Value
	}
	props, _ := objectProperties(schema)
	if !rb.Required && len(props) == 0 && schema != nil && schema.Type.Is("object") &&
		schema.AdditionalProperties.Has == nil && schema.AdditionalProperties.Schema == nil &&
		len(schema.OneOf) == 0 && len(schema.AnyOf) == 0 {
		// An optional body that can hold nothing: Stripe declares one on
		// every operation, GETs included. No argument, and no body sent.
		return nil, nil
	}
	isObject := len(props) > 0 && (schema.Type == nil || schema.Type.Is("object") || schema.Type.IsEmpty())
	if strings.HasPrefix(bb.mediaType, "text/") || bb.mediaType == "application/octet-stream" {
		isObject = false
	}
	bb.whole = !isObject
	if media != nil && len(media.Encoding) > 0 {
		bb.partTypes = map[string]string{}
		for name, enc := range media.Encoding {
			if enc == nil {
				continue
			}
			if ct := partContentType(enc.ContentType); ct != "" {
				bb.partTypes[name] = ct
			}
		}
	}
	return bb, schema
}

// partContentType is the Content-Type a multipart part is sent with, from
// its encoding's contentType, which OpenAPI lets be a media type, a
// wildcard (image/*) or a comma-separated list of them: the first concrete
// type of the list, as mime formats it; application/octet-stream when the
// list holds wildcards only (the part is still binary, and no header names
// a wildcard); "" when no entry is a media type, so that the property is
// sent as a part without an encoding is. The document's text never reaches
// a part's header as it is: a CR or LF in it cannot add a header.
func partContentType(list string) string {
	wildcard := false
	for _, e := range strings.Split(list, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(e))
		if err != nil || !strings.Contains(mt, "/") { // mime takes a disposition ("png") too
			continue
		}
		if strings.Contains(mt, "*") {
			wildcard = true
			continue
		}
		if ct := mime.FormatMediaType(mt, params); ct != "" {
			return ct
		}
	}
	if wildcard {
		return "application/octet-stream"
	}
	return ""
}

func normalizeMedia(mt string) string {
	return strings.ToLower(strings.TrimSpace(strings.Split(mt, ";")[0]))
}

func bodySchemaRef(op *openapi3.Operation, contentKey string) *openapi3.SchemaRef {
	if media := op.RequestBody.Value.Content[contentKey]; media != nil {
		return media.Schema
	}
	return nil
}

// encodeBody builds the request body and its Content-Type. It returns a nil
// body when the operation takes none or the caller gave no body arguments, so a
// GET never carries a body it did not ask for.
func (b *Binding) encodeBody(args map[string]any) (io.Reader, string, error) {
	bb := b.body
	if bb == nil {
		return nil, "", nil
	}
	var value any
	if bb.whole {
		v, ok := args[bodyArg]
		if !ok {
			return nil, "", nil
		}
		value = v
	} else {
		obj := map[string]any{}
		for _, p := range bb.props {
			if v, ok := args[p.arg]; ok {
				obj[p.name] = v
			}
		}
		if len(obj) == 0 && !bb.required {
			return nil, "", nil
		}
		value = obj
	}
	mt := bb.mediaType
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		raw, err := json.Marshal(value)
		if err != nil {
			return nil, "", err
		}
		return bytes.NewReader(raw), mt, nil
	case mt == "application/x-www-form-urlencoded":
		obj, ok := value.(map[string]any)
		if !ok {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": a form body must be an object"}}
		}
		var pairs []string
		for _, k := range sortedKeys(obj) {
			pairs = append(pairs, formPairs(k, obj[k])...)
		}
		return strings.NewReader(strings.Join(pairs, "&")), mt, nil
	case mt == "multipart/form-data":
		obj, ok := value.(map[string]any)
		if !ok {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": a multipart body must be an object"}}
		}
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, k := range sortedKeys(obj) {
			if err := writePart(w, k, obj[k], bb.partTypes[k]); err != nil {
				return nil, "", err
			}
		}
		if err := w.Close(); err != nil {
			return nil, "", err
		}
		return &buf, w.FormDataContentType(), nil
	case mt == "application/octet-stream":
		s, ok := value.(string)
		if !ok {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": must be a base64 string"}}
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": not valid base64: " + err.Error()}}
		}
		return bytes.NewReader(raw), mt, nil
	default: // text/*
		if s, ok := value.(string); ok {
			return strings.NewReader(s), mt, nil
		}
		return strings.NewReader(scalar(value)), mt, nil
	}
}

// formPairs encodes a form field: arrays repeat the key; objects use the
// deepObject-like key[sub]=v convention that form APIs (Stripe, Twilio) expect.
func formPairs(key string, v any) []string {
	switch val := v.(type) {
	case []any:
		var out []string
		for i, e := range val {
			switch e.(type) {
			case map[string]any:
				out = append(out, formPairs(key+"["+strconv.Itoa(i)+"]", e)...)
			default:
				out = append(out, url.QueryEscape(key)+"="+url.QueryEscape(scalar(e)))
			}
		}
		return out
	case map[string]any:
		var out []string
		for _, k := range sortedKeys(val) {
			out = append(out, formPairs(key+"["+k+"]", val[k])...)
		}
		return out
	}
	return []string{url.QueryEscape(key) + "=" + url.QueryEscape(scalar(v))}
}

func writePart(w *multipart.Writer, name string, v any, ctype string) error {
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if err := writePart(w, name, e, ctype); err != nil {
				return err
			}
		}
		return nil
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, name))
	var data []byte
	switch {
	case ctype != "" && !strings.HasPrefix(ctype, "text/") && !isJSON(ctype):
		// Binary part: the argument is base64.
		s, _ := v.(string)
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return &ArgumentError{Problems: []string{name + ": not valid base64: " + err.Error()}}
		}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, name, name))
		h.Set("Content-Type", ctype)
		data = raw
	case isObjectOrArray(v) || isJSON(ctype):
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		h.Set("Content-Type", "application/json")
		data = raw
	default:
		data = []byte(scalar(v))
	}
	pw, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = pw.Write(data)
	return err
}

func isObjectOrArray(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}
