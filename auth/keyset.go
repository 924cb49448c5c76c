package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet is the issuer's JWKS, an [oidc.KeySet]. It is written here rather
// than taken from go-oidc's RemoteKeySet because that one fetches the JWKS
// again for every token whose kid it does not know, and for every token
// whose signature fails with a known kid: a client sending garbage could make
// the gateway hammer the IdP. This one fetches again only for an unknown kid
// (a known kid whose signature fails is just a bad token), at most once per
// minRefetch, and coalesces concurrent fetches into one. A key rotated in at
// the IdP is therefore picked up within minRefetch of its first use.
// Safe for concurrent use.
type keySet struct {
	url        string
	client     *http.Client
	algs       []jose.SignatureAlgorithm
	minRefetch time.Duration
	now        func() time.Time

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	fetched  time.Time     // when the last fetch started
	inflight chan struct{} // closed when the fetch in flight ends; nil when none
	lastErr  error
}

// Reasons a signature is refused. They are the words of the 401 body.
var (
	errUnknownKey   = errors.New("the token is signed with a key the issuer does not publish (unknown kid)")
	errBadSignature = errors.New("the token's signature does not verify")
)

// maxJWKSBytes bounds the JWKS document read.
const maxJWKSBytes = 1 << 20

// VerifySignature implements oidc.KeySet. go-oidc has checked the algorithm
// against the allowed list before it calls this.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, k.algs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, errMalformed
	}
	kid := jws.Signatures[0].Header.KeyID
	keys := k.current()
	if payload, known, err := verifyWith(jws, keys, kid); known {
		return payload, err
	}
	keys, err = k.refresh(ctx)
	if err != nil {
		return nil, err
	}
	if payload, known, err := verifyWith(jws, keys, kid); known {
		return payload, err
	}
	if kid == "" {
		return nil, errBadSignature
	}
	return nil, errUnknownKey
}

// verifyWith verifies jws with the key named kid. known says whether such a
// key was there; then err says whether it verified. A token without a kid is
// tried with every key and counts as known only when one verifies, so that a
// rotation can still be picked up for it.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) (payload []byte, known bool, err error) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if p, err := jws.Verify(&keys[i]); err == nil {
			return p, true, nil
		}
		if kid != "" {
			return nil, true, errBadSignature
		}
	}
	return nil, false, nil
}

func (k *keySet) current() []jose.JSONWebKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys
}

// refresh fetches the JWKS unless a fetch started less than minRefetch ago,
// in which case it returns the keys it has. Concurrent callers share one
// fetch.
func (k *keySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	if ch := k.inflight; ch != nil {
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.keys, nil
	}
	if !k.fetched.IsZero() && k.now().Sub(k.fetched) < k.minRefetch {
		defer k.mu.Unlock()
		return k.keys, nil
	}
	ch := make(chan struct{})
	k.inflight, k.fetched = ch, k.now()
	k.mu.Unlock()

	// Detached from the caller: the fetch serves every waiter, and one
	// caller hanging up must not fail it for the others.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	keys, err := k.fetch(fctx)
	cancel()

	k.mu.Lock()
	defer k.mu.Unlock()
	k.inflight = nil
	close(ch)
	k.lastErr = err
	if err != nil {
		return k.keys, nil // keep the keys we had; the token fails as unknown
	}
	k.keys = keys
	return keys, nil
}

// fetch GETs the JWKS. Keys that are not public signing keys of a supported
// type are skipped, as RFC 7517 §5 asks, rather than failing the whole set.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("auth: fetch jwks: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth: fetch jwks: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("auth: fetch jwks: larger than %d bytes", maxJWKSBytes)
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("auth: fetch jwks: not a JWK set: %v", err)
	}
	var keys []jose.JSONWebKey
	for _, r := range raw.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(r, &key) != nil || key.Use == "enc" {
			continue
		}
		// Only asymmetric public keys: a symmetric ("oct") key published
		// in a JWKS would let anyone who reads it sign tokens.
		if _, sym := key.Key.([]byte); sym {
			continue
		}
		if !key.IsPublic() {
			key = key.Public()
		}
		if key.Valid() {
			keys = append(keys, key)
		}
	}
	return keys, nil
}
