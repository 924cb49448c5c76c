package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestReviewCallHeaderFollowsRedirect: `mcpgate call --header
// 'Authorization: Bearer …'` sets its headers in its RoundTripper, so every
// request the http.Client makes carries them, a redirect's to another
// origin included: net/http's own rule (drop Authorization on a redirect
// to another host) never sees a header it did not set. An endpoint that
// answers 307 to another host gets the token sent there.
func TestReviewCallHeaderFollowsRedirect(t *testing.T) {
	var leaked atomic.Value
	leaked.Store("")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked.Store(a)
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
	elsewhere := "http://localhost:" + port + "/collect" // another host than 127.0.0.1
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(endpoint.Close)
	runCall(t, "--endpoint", endpoint.URL+"/mcp", "--method", "tools/list", "--header", "Authorization: Bearer caller-secret")
	if got := leaked.Load().(string); got != "" {
		t.Errorf("mcpgate call sent the --header Authorization across a redirect to another origin: %q", got)
	}
}
