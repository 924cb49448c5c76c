package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// TestRESTTransportHundredReloads: across 100 reloads that keep, change
// (host, direct_transport) and rename an upstream, each retired gateway
// closed one reload late (as Front closes one whose last session ends
// after the next swap), no connection outlives the transports still in
// use: after each retirement, the connections open to the upstream are
// at most the live gateways' transports, and none is left once the last
// gateway is closed. Asked by the red-team brief (a retired transport's
// idle pool, leaks across reloads); it held on the code as merged.
func TestRESTTransportHundredReloads(t *testing.T) {
	api := newCountingAPI(t, &upstreamLog{})
	localhost := strings.Replace(api.URL, "127.0.0.1", "localhost", 1)
	yes, no := true, false
	variants := []Upstream{
		{Name: "things", BaseURL: api.URL, DirectTransport: &yes},
		{Name: "things", BaseURL: api.URL + "/v2", DirectTransport: &yes}, // kept: path only
		{Name: "stuff", BaseURL: api.URL, DirectTransport: &yes},          // kept: renamed
		{Name: "stuff", BaseURL: localhost, DirectTransport: &yes},        // another host
		{Name: "stuff", BaseURL: localhost, DirectTransport: &no},         // net/http's
		{Name: "things", BaseURL: api.URL, DirectTransport: &no},
	}
	var live []*Gateway // oldest first
	var prev *Gateway
	for i := range 100 {
		u := variants[(i*7+i/6)%len(variants)]
		u.OpenAPI, u.Document = "things.json", []byte(testDoc)
		g, err := New(t.Context(), &Config{Upstreams: []Upstream{u}}, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		restCall(t, g, "get_thing")
		live = append(live, g)
		prev = g
		if len(live) > 2 { // retire the one before the previous
			live[0].Close()
			live = live[1:]
		}
		transports := map[*transportShare]bool{}
		for _, l := range live {
			for _, use := range l.transports {
				transports[use.share] = true
			}
		}
		waitFor(t, fmt.Sprintf("reload %d: at most %d connections open", i, len(transports)), func() bool {
			return api.opened.Load()-api.closed.Load() <= int64(len(transports))
		})
	}
	for _, l := range live {
		l.Close()
	}
	waitFor(t, "every connection closed with the last gateway", func() bool { return api.opened.Load() == api.closed.Load() })
	t.Logf("100 reloads: %d connections opened", api.opened.Load())
}
