package caller

import (
	"net/http"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcpgate/mcpgate/auth"
)

func TestCaller(t *testing.T) {
	user := &sdkauth.TokenInfo{UserID: "x"}
	client := &sdkauth.TokenInfo{UserID: "x", Extra: map[string]any{auth.ClientSubject: true}}
	hdr := func(vs ...string) http.Header { return http.Header{"Authorization": vs} }
	for _, tt := range []struct {
		name  string
		a, b  Caller
		same  bool
		known bool // of a
	}{
		{"a user refreshing its token is one caller", Of(user, hdr("Bearer 1")), Of(&sdkauth.TokenInfo{UserID: "x"}, hdr("Bearer 2")), true, true},
		{"a client is never the user with the same string", Of(user, nil), Of(client, nil), false, true},
		{"unverified: the header is the caller", Of(nil, hdr("Bearer 1")), Of(nil, hdr("Bearer 1")), true, true},
		{"unverified: another header is another caller", Of(nil, hdr("Bearer 1")), Of(nil, hdr("Bearer 2")), false, true},
		{"unverified: every value of the header counts", Of(nil, hdr("Bearer 1", "Bearer 2")), Of(nil, hdr("Bearer 1")), false, true},
		{"a verified user is not the unverified header of the same text", Of(user, nil), Of(nil, hdr("x")), false, true},
		{"no credential: anonymous, one for all", Of(nil, nil), Of(nil, http.Header{"Cookie": {"c"}}), true, false},
		{"a token without a subject falls back to the header", Of(&sdkauth.TokenInfo{}, hdr("Bearer 1")), Of(nil, hdr("Bearer 1")), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := NewKey([]byte("test"))
			if got := tt.a == tt.b; got != tt.same {
				t.Errorf("callers equal = %v, want %v", got, tt.same)
			}
			if got := k.Digest(tt.a) == k.Digest(tt.b); got != tt.same {
				t.Errorf("digests equal = %v, want %v", got, tt.same)
			}
			if got := k.RunKey(tt.a) == k.RunKey(tt.b) && k.RunKey(tt.a) != ""; got != (tt.same && tt.known) {
				t.Errorf("run keys equal and set = %v, want %v", got, tt.same && tt.known)
			}
			if tt.a.Known() != tt.known {
				t.Errorf("Known() = %v, want %v", tt.a.Known(), tt.known)
			}
		})
	}
}

func TestDigestHoldsNoCredential(t *testing.T) {
	c := Of(nil, http.Header{"Authorization": {"Bearer s3cret"}})
	k := ProcessKey()
	if d := k.Digest(c); string(d[:]) == "Bearer s3cret" || len(k.RunKey(c)) != 64 {
		t.Errorf("digest %x run key %q", d, k.RunKey(c))
	}
}
