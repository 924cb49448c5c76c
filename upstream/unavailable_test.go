package upstream

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUnavailable: which failed document fetches a retry may mend (the
// gateway starts without the upstream and retries) and which are mistakes
// (a start-up error).
func TestUnavailable(t *testing.T) {
	// A port nothing listens on: take one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/openapi.json"
	ln.Close()
	status := func(code int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/openapi.json"
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte(`{"openapi":"3.0.3",`))
		// The handler returns with 980 bytes promised: the connection
		// is cut mid-body.
	}))
	t.Cleanup(broken.Close)
	for _, tc := range []struct {
		name, src   string
		unavailable bool
	}{
		{"connection refused", closed, true},
		{"503", status(http.StatusServiceUnavailable, "starting"), true},
		{"502", status(http.StatusBadGateway, ""), true},
		{"429", status(http.StatusTooManyRequests, ""), true},
		{"408", status(http.StatusRequestTimeout, ""), true},
		{"cut mid-body", broken.URL + "/openapi.json", true},
		{"404", status(http.StatusNotFound, "no such document"), false},
		{"401", status(http.StatusUnauthorized, ""), false},
		{"not a document", status(http.StatusOK, "<html>hello</html>"), false},
		{"missing file", "testdata/no-such-file.json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadDocument(t.Context(), tc.src, nil)
			if err == nil {
				t.Fatal("loaded")
			}
			if got := Unavailable(err); got != tc.unavailable {
				t.Errorf("Unavailable(%v) = %v, want %v", err, got, tc.unavailable)
			}
		})
	}
}
