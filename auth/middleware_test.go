package auth

import (
	"net/http"
	"testing"
)

// TestBearerToken: the one reader of a caller's bearer token (the gateway's
// credentials, the NoETL endpoint and the middleware all use it).
func TestBearerToken(t *testing.T) {
	tests := []struct {
		in, tok string
		ok      bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"  Bearer   abc  ", "abc", true},
		{"Basic dXNlcjpwdw==", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		tok, ok := BearerToken(http.Header{"Authorization": {tt.in}})
		if tok != tt.tok || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.in, tok, ok, tt.tok, tt.ok)
		}
	}
}
