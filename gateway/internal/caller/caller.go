// Package caller says who sent a request, the one way the gateway tells
// callers apart. Four things hang on it, each with its own rule:
//
//   - a stateful session belongs to the caller of its initialize, and a
//     request from anyone else on that session id is answered as an unknown
//     session ([Caller.Digest]);
//   - an MCP task belongs to the caller that created it; its sealed id holds
//     the first 16 bytes of [Caller.Digest];
//   - a notifications/cancelled cancels only its own caller's call of that
//     request id (the front door's registry of calls in flight keys by the
//     Caller itself, which is comparable);
//   - a re-sent playbook call joins its own caller's run, and per-caller run
//     caps count by caller ([Caller.RunKey]: "" for a caller that cannot be
//     told from others, whose calls are never merged).
//
// The rule: when the gateway verifies tokens, a caller is the verified
// token's subject (sub), so a client that refreshes its token keeps its
// sessions, tasks and runs; a token without sub is its client (client_id),
// never taken for a user whose sub is the same string (auth.ClientSubject).
// Without verification a caller is the Authorization header it sent (all of
// its values): a different header is a different caller, and requests with
// no header at all are one anonymous caller, which [Caller.Known] reports.
// A caller never holds more than the request it came from, and nothing
// derived from it is logged.
package caller

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcpgate/mcpgate/auth"
)

// A Caller is who sent a request. The zero value is the anonymous caller.
// Callers are comparable: == tells callers apart, and a Caller can key a map
// of state that lives only while the request does (never logged, never
// stored past it: Digest is for that). Making one allocates nothing but the
// header join of a request with several Authorization values.
type Caller struct {
	kind kind
	// id is the verified subject (sub, or client_id for kindClient), else
	// the Authorization header's values joined by "\n".
	id string
}

type kind uint8

const (
	kindHeader kind = iota // unverified: the Authorization header, or none
	kindSub                // a verified token's sub
	kindClient             // a verified token without sub: its client_id
)

// Of is the caller of a request whose verified token is ti (nil when none
// was verified) and whose headers are h.
func Of(ti *sdkauth.TokenInfo, h http.Header) Caller {
	if ti != nil && ti.UserID != "" {
		if ti.Extra[auth.ClientSubject] == true {
			return Caller{kind: kindClient, id: ti.UserID}
		}
		return Caller{kind: kindSub, id: ti.UserID}
	}
	// strings.Join of one value is that value: no copy for the usual case.
	return Caller{id: strings.Join(h.Values("Authorization"), "\n")}
}

// FromRequest is the caller of r: its verified token (go-sdk's
// auth.TokenInfoFromContext, set by the verifier's middleware) and headers.
func FromRequest(r *http.Request) Caller {
	return Of(sdkauth.TokenInfoFromContext(r.Context()), r.Header)
}

// Known reports whether the caller can be told from others: a verified
// subject, or an Authorization header.
func (c Caller) Known() bool { return c.kind != kindHeader || c.id != "" }

// Digest is a SHA-256 of the caller, for what outlives the request (the
// session book, sealed task ids): it holds no credential. The anonymous
// caller has a digest too (of an empty header), one for all such requests.
func (c Caller) Digest() [sha256.Size]byte {
	prefix := [...]string{kindHeader: "authorization\x00", kindSub: "sub\x00", kindClient: "client\x00"}[c.kind]
	return sha256.Sum256([]byte(prefix + c.id))
}

// RunKey names the caller in the playbook runner (playbook.Request.Caller):
// the digest in hex, or "" for a caller the gateway cannot tell from others,
// whose calls are never merged with anyone's.
func (c Caller) RunKey() string {
	if !c.Known() {
		return ""
	}
	d := c.Digest()
	return hex.EncodeToString(d[:])
}
