package direct

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// BenchmarkRemoteTransport sends a GET with a small JSON answer over
// loopback through the direct transport and through net/http's (one at a
// time, and from GOMAXPROCS goroutines at once): the measure behind
// Transport. On 2 shared cores (go test -bench RemoteTransport
// -benchmem ./upstream/internal/direct, two runs): one at a time, 20–21 µs for both (the
// server shares the process and its scheduler here); from two goroutines,
// 14 µs a request against net/http's 18–19, and 3.9 KB in 44 allocations
// against 5.6 KB in 63. Across processes, where each wake-up may cross
// cores, mcpgate-bench measures the latency it saves at one call in flight.
func BenchmarkRemoteTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"a","q":"b"}`)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	target := pathX(u)
	for _, tr := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"direct", newTransport(u)},
		{"net-http", NetHTTP()},
	} {
		send := func(b *testing.B) {
			req, _ := newRequest(context.Background(), http.MethodGet, target, nil)
			resp, err := tr.rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.Run(tr.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				send(b)
			}
		})
		b.Run(tr.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					send(b)
				}
			})
		})
	}
}
