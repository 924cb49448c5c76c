package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/upstream/internal/direct"
)

// TestRemoteTransport: a remote Client's transport is the direct one for a
// plain-http base URL, net/http's for https or when ClientOptions.Transport
// says so (the gateway's direct_transport: false).
func TestRemoteTransport(t *testing.T) {
	for _, tt := range []struct {
		name       string
		base       string
		opts       *ClientOptions
		wantDirect bool
	}{
		{"http", "http://api.internal:8080/v1", nil, true},
		{"https", "https://api.example.com/v1", nil, false},
		{"http, net/http asked for", "http://api.internal:8080/v1", &ClientOptions{Transport: NewTransport()}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewRemote(tt.base, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			switch rt := c.rt.(type) {
			case *direct.Transport:
				if !tt.wantDirect {
					t.Errorf("%s: the direct transport, want net/http's", tt.base)
				}
			case *http.Transport:
				if tt.wantDirect {
					t.Errorf("%s: net/http's transport, want the direct one", tt.base)
				}
			default:
				t.Errorf("%s: a %T", tt.base, rt)
			}
		})
	}
}

// TestDirectTransportTruncated: an answer read only in part (the response
// bound) closes its connection instead of draining it, through a Client
// with the direct transport: the server sees each call on a connection of
// its own, and both connections closed (none left idle in the pool).
func TestDirectTransportTruncated(t *testing.T) {
	var opened, closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10000")
		io.WriteString(w, strings.Repeat("a", 10000))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := NewRemote(srv.URL, &ClientOptions{MaxResponseBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.rt.(*direct.Transport); !ok {
		t.Fatalf("a Client for %s uses %T, want the direct transport", srv.URL, c.rt)
	}
	for range 2 {
		u, err := joinURL(c.base, "/x", "")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := newRequest(context.Background(), "GET", u, nil)
		a, _, rep := c.exchange(context.Background(), req, acceptCall, Credentials{}, &reservation{limit: 100})
		if a == nil || !a.truncated || len(a.body) != 100 {
			t.Fatalf("exchange: %+v %+v", a, rep)
		}
	}
	// The server sees a connection closed when it reads for the next
	// request; one left idle in the pool would never be.
	waitFor(t, func() bool { return closed.Load() == 2 })
	if n := opened.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}
