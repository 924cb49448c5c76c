package federation

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCredentialOrigin: the credential goes to the endpoint's origin only,
// not along a redirect to another.
func TestCredentialOrigin(t *testing.T) {
	var other string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other = r.Header.Get("Authorization")
	}))
	defer elsewhere.Close()
	var own string
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		own = r.Header.Get("Authorization")
		http.Redirect(w, r, elsewhere.URL, http.StatusFound)
	}))
	defer home.Close()
	c := &http.Client{Transport: &credTransport{base: http.DefaultTransport, origin: origin(home.URL + "/mcp"), value: "Bearer t"}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, home.URL+"/mcp", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if own != "Bearer t" || other != "" {
		t.Errorf("Authorization at the endpoint %q, elsewhere %q", own, other)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the caller's request was changed")
	}
}

func FuzzBoundedLines(f *testing.F) {
	f.Add("a\nb\n", 4)
	f.Add(strings.Repeat("x", 5000)+"\n\n", 16)
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		n := 0
		boundedLines(strings.NewReader(in), max, func(line string, cut bool) {
			n++
			if len(line) > max || strings.Contains(line, "\n") {
				t.Fatalf("line %q over %d or with a newline", line, max)
			}
			_ = utf8.ValidString(line) // a cut may split a rune; slog quotes it
		})
		if want := strings.Count(in, "\n"); n < want {
			t.Fatalf("%d lines for %d newlines", n, want)
		}
	})
}
