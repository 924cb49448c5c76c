package caller

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestDigestKeyed: a digest is HMAC-SHA256 under the key derived from the
// secret, not a hash anyone can recompute from a guessed header (red-team
// finding 1 of issue 24); one secret gives one key in every process (the
// replicas of a fleet agree), another secret another key; the process key
// is one for the life of the process.
func TestDigestKeyed(t *testing.T) {
	const basic = "Basic YWxpY2U6czNjcmV0"
	c := Of(nil, http.Header{"Authorization": {basic}})
	k := NewKey([]byte("fleet secret, at least 32 bytes long"))
	d := k.Digest(c)
	for _, guess := range []string{basic, "authorization\x00" + basic} {
		if sha256.Sum256([]byte(guess)) == d {
			t.Errorf("the digest is SHA-256(%q): testable offline", guess)
		}
	}
	// The construction, spelled out: HMAC(HMAC(secret, label), kind || id).
	m := hmac.New(sha256.New, []byte("fleet secret, at least 32 bytes long"))
	m.Write([]byte("mcpgate caller digest v1"))
	m = hmac.New(sha256.New, m.Sum(nil))
	m.Write([]byte("authorization\x00" + basic))
	if !hmac.Equal(m.Sum(nil), d[:]) {
		t.Errorf("digest %x is not HMAC-SHA256 under the derived key", d)
	}
	if NewKey([]byte("fleet secret, at least 32 bytes long")).Digest(c) != d {
		t.Error("two keys from one secret digest a caller differently: replicas would not agree")
	}
	if NewKey([]byte("another secret")).Digest(c) == d {
		t.Error("two secrets give one digest")
	}
	if ProcessKey() != ProcessKey() || ProcessKey().Digest(c) != ProcessKey().Digest(c) {
		t.Error("the process key changed within the process")
	}
	if ProcessKey().Digest(c) == d {
		t.Error("the process key is the secret's")
	}
}

// TestDigestConcurrent: digests computed at once, of headers short and
// long (past what the pool keeps), are each the caller's.
func TestDigestConcurrent(t *testing.T) {
	k := NewKey([]byte("s"))
	callers := []Caller{Of(nil, nil), Of(nil, http.Header{"Authorization": {"Bearer a"}}), Of(nil, http.Header{"Authorization": {strings.Repeat("x", 3*maxPooledBuf)}})}
	want := make([][sha256.Size]byte, len(callers))
	for i, c := range callers {
		want[i] = k.Digest(c)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for n := range 300 {
				i := n % len(callers)
				if k.Digest(callers[i]) != want[i] {
					t.Errorf("caller %d: another digest", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkDigest(b *testing.B) {
	c := Of(nil, http.Header{"Authorization": {"Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"}})
	k := NewKey([]byte("s"))
	b.ReportAllocs()
	for b.Loop() {
		_ = k.Digest(c)
	}
}
