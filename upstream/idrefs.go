package upstream

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// resolveIDRefs rewrites, in an OpenAPI 3.1 document, every $ref that names a
// schema of the same document by its $id (or $id#anchor, or a plain #anchor)
// into the JSON pointer of that schema. kin-openapi takes such a $ref for an
// external one and refuses it while external refs are off; swagger-api's 3.1
// petstores use them. Nothing is fetched: a $ref that names no schema of this
// document is left as it is, and is refused as external when loaded.
//
// It returns data itself, and changed false, when no $ref was rewritten.
func resolveIDRefs(data []byte) (out []byte, changed bool, err error) {
	if !bytes.Contains(data, []byte(`"$id"`)) && !bytes.Contains(data, []byte(`"$anchor"`)) {
		return data, false, nil
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, false, err
	}
	root := &url.URL{Scheme: "mcpgate", Opaque: "document"}
	targets := map[string]string{} // resolved $id or $id#anchor → JSON pointer
	collectIDs(doc, root, "", targets)
	if len(targets) == 0 || !rewriteRefs(doc, root, targets) {
		return data, false, nil
	}
	out, err = json.Marshal(doc)
	return out, err == nil, err
}

// collectIDs records the pointer of every schema with an $id or $anchor,
// keyed by its URI resolved against the enclosing base.
func collectIDs(v any, base *url.URL, ptr string, targets map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if id, ok := x["$id"].(string); ok {
			if u, err := base.Parse(id); err == nil {
				base = u
				u2 := *u
				u2.Fragment = ""
				targets[u2.String()] = ptr
			}
		}
		if anchor, ok := x["$anchor"].(string); ok {
			u := *base
			u.Fragment = anchor
			targets[u.String()] = ptr
		}
		for k, e := range x {
			collectIDs(e, base, ptr+"/"+escapePointer(k), targets)
		}
	case []any:
		for i, e := range x {
			collectIDs(e, base, ptr+"/"+strconv.Itoa(i), targets)
		}
	}
}

// rewriteRefs replaces each $ref that resolves to a collected target; it
// reports whether it changed anything.
func rewriteRefs(v any, base *url.URL, targets map[string]string) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if id, ok := x["$id"].(string); ok {
			if u, err := base.Parse(id); err == nil {
				base = u
			}
		}
		if ref, ok := x["$ref"].(string); ok && !strings.HasPrefix(ref, "#/") {
			if u, err := base.Parse(ref); err == nil {
				if ptr, ok := targets[u.String()]; ok {
					x["$ref"] = "#" + ptr
					changed = true
				}
			}
		}
		for k, e := range x {
			if k != "$ref" && rewriteRefs(e, base, targets) {
				changed = true
			}
		}
	case []any:
		for _, e := range x {
			if rewriteRefs(e, base, targets) {
				changed = true
			}
		}
	}
	return changed
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
