package federation

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// TestCappedBody: a body of max bytes reads whole; one byte more fails
// the read, naming the bound, whatever the size of the reads.
func TestCappedBody(t *testing.T) {
	for _, tt := range []struct {
		body    string
		max     int64
		wantErr bool
	}{
		{"", 4, false},
		{"abcd", 4, false},
		{"abcde", 4, true},
		{strings.Repeat("x", 10000), 9999, true},
		{strings.Repeat("x", 10000), 10000, false},
	} {
		for _, r := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
			b := &cappedBody{rc: io.NopCloser(r(strings.NewReader(tt.body))), left: tt.max, max: tt.max, name: "up"}
			got, err := io.ReadAll(b)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "answer over max_response_bytes") || int64(len(got)) != tt.max {
					t.Errorf("%d bytes, max %d: read %d, err %v; want %d and the bound's error", len(tt.body), tt.max, len(got), err, tt.max)
				}
				continue
			}
			if err != nil || string(got) != tt.body {
				t.Errorf("%d bytes, max %d: read %d, err %v", len(tt.body), tt.max, len(got), err)
			}
		}
	}
}

// TestGuardOrigin: a request to another origin than the endpoint's is
// refused before anything is sent; the endpoint's own goes through.
func TestGuardOrigin(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the other origin was reached") }))
	defer other.Close()
	g := &guard{base: http.DefaultTransport, origin: origin(srv.URL + "/mcp"), name: "up", max: 1 << 20}
	c := &http.Client{Transport: g}
	if resp, err := c.Get(srv.URL + "/mcp"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the endpoint's origin: %v", err)
	}
	if _, err := c.Post(other.URL+"/messages", "application/json", strings.NewReader(`{"arguments":"secret"}`)); err == nil || !strings.Contains(err.Error(), "refusing a request to an origin other than") {
		t.Errorf("another origin: %v", err)
	}
	if hits != 1 {
		t.Errorf("%d hits at the endpoint", hits)
	}
}

// TestSoleCall: a log message goes to a call only when no other call on
// its session can have sent it.
func TestSoleCall(t *testing.T) {
	mk := func(ended, returned bool) *call {
		c := &call{}
		c.ended.Store(ended)
		c.returned.Store(returned)
		return c
	}
	open, settling, done := mk(false, false), mk(true, false), mk(true, true)
	for _, tt := range []struct {
		name  string
		calls []*call
		want  *call
	}{
		{"none", nil, nil},
		{"one in flight", []*call{open}, open},
		{"one in flight, one done", []*call{done, open}, open},
		{"one in flight, one awaiting its late notifications", []*call{settling, open}, nil},
		{"two in flight", []*call{open, mk(false, false)}, nil},
		{"one awaiting its late notifications", []*call{settling}, settling},
		{"one done", []*call{done}, done},
		{"two done", []*call{done, mk(true, true)}, nil},
	} {
		if got := soleCall(tt.calls); got != tt.want {
			t.Errorf("%s: got %p, want %p", tt.name, got, tt.want)
		}
	}
}
