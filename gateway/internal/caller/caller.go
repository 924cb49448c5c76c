// Package caller says who sent a request, the one way the gateway tells
// callers apart. Four things hang on it, each with its own rule:
//
//   - a stateful session belongs to the caller of its initialize, and a
//     request from anyone else on that session id is answered as an unknown
//     session ([Key.Digest]);
//   - an MCP task belongs to the caller that created it; its sealed id holds
//     the first 16 bytes of [Key.Digest];
//   - a notifications/cancelled cancels only its own caller's call of that
//     request id (the front door's registry of calls in flight keys by the
//     Caller itself, which is comparable; a cancellation published to the
//     other replicas of a fleet names the caller by [Key.Digest]);
//   - a re-sent playbook call joins its own caller's run, and per-caller run
//     caps count by caller ([Key.RunKey]: "" for a caller that cannot be
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
//
// The anonymous caller is one caller everywhere, on purpose: a stateless
// request without credentials carries nothing that tells its sender from
// another, so a notifications/cancelled from it (which names only a request
// id) cancels the anonymous calls of that id, in one process and, with
// shared state, on every replica of the fleet alike. That is inherent to an
// open gateway, not a fleet's doing: clients that must not cancel each
// other's calls send an Authorization header (any distinct value will do
// when the gateway verifies nothing), or use stateful sessions, whose calls
// are scoped by their session id. Runs are stricter: the anonymous caller's
// playbook calls are never merged (RunKey is "").
//
// What outlives a request, or leaves the process (a fleet's Redis), names
// the caller by its digest: an HMAC-SHA256 under a [Key], never a plain
// hash, so that someone who reads the store cannot test guesses of a Basic
// credential or a low-entropy token against it. Every replica of a fleet
// needs the same key: the gateway derives it from the task key
// ([NewKey]), and a gateway without one uses [ProcessKey], random and
// made once per process, so that a digest is stable across reloads.
package caller

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcpgate/mcpgate/auth"
)

// A Caller is who sent a request. The zero value is the anonymous caller.
// Callers are comparable: == tells callers apart, and a Caller can key a map
// of state that lives only while the request does (never logged, never
// stored past it: Key.Digest is for that). Making one allocates nothing but the
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

// A Key keys caller digests: HMAC-SHA256 under a secret. Safe for
// concurrent use; make one with NewKey or ProcessKey.
type Key struct {
	pool sync.Pool // of *digester
}

// A digester is one HMAC, with the buffers a digest needs, reused.
type digester struct {
	mac hash.Hash
	buf []byte
	sum []byte
}

// digestLabel is what NewKey derives the digest key under: the same secret
// keys other things (the task ids' AES key) under labels of their own.
const digestLabel = "mcpgate caller digest v1"

// maxPooledBuf bounds the buffer a digester keeps for its next digest: an
// Authorization header may be as long as the server's header limit, and
// one such header must not pin that much memory in the pool.
const maxPooledBuf = 4 << 10

// NewKey returns the key of caller digests derived from secret (the task
// key: tasks.key_env's text): HMAC-SHA256(secret, "mcpgate caller digest
// v1"). Gateways given the same secret digest callers alike.
func NewKey(secret []byte) *Key {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(digestLabel))
	return newKey(m.Sum(nil))
}

func newKey(k []byte) *Key {
	key := &Key{}
	key.pool.New = func() any {
		return &digester{mac: hmac.New(sha256.New, k), buf: make([]byte, 0, 128), sum: make([]byte, 0, sha256.Size)}
	}
	return key
}

var processKey = sync.OnceValue(func() *Key {
	var k [32]byte
	rand.Read(k[:])
	return newKey(k[:])
})

// ProcessKey returns this process's key: random, made at its first use and
// the same until the process exits (reloads included). Its digests mean
// nothing to another process: it is for a gateway with no task key, which
// shares no state with another one.
func ProcessKey() *Key { return processKey() }

var kindPrefix = [...]string{kindHeader: "authorization\x00", kindSub: "sub\x00", kindClient: "client\x00"}

// Digest is the caller's digest under k, for what outlives the request (the
// session book, sealed task ids, a fleet's Redis): it holds no credential,
// and without k it cannot be told from random. The anonymous caller has a
// digest too (of an empty header), one for all such requests.
func (k *Key) Digest(c Caller) (d [sha256.Size]byte) {
	g := k.pool.Get().(*digester)
	g.buf = append(append(g.buf[:0], kindPrefix[c.kind]...), c.id...)
	g.mac.Reset()
	g.mac.Write(g.buf)
	g.sum = g.mac.Sum(g.sum[:0])
	copy(d[:], g.sum)
	if cap(g.buf) <= maxPooledBuf {
		k.pool.Put(g)
	}
	return d
}

// RunKey names the caller in the playbook runner (playbook.Request.Caller):
// its digest under k in hex, or "" for a caller the gateway cannot tell from
// others, whose calls are never merged with anyone's.
func (k *Key) RunKey(c Caller) string {
	if !c.Known() {
		return ""
	}
	d := k.Digest(c)
	return hex.EncodeToString(d[:])
}
