package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// serveHealth answers /healthz, the liveness probe: the process is up and
// serving HTTP. It checks nothing else, so that an orchestrator restarts the
// gateway only when restarting can help.
func (g *Gateway) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": "ok", "tools": g.served})
}

// serveReady answers /readyz, the readiness probe: 200 when the gateway can
// serve tool calls (see readiness), else 503 with a one-line JSON reason.
func (g *Gateway) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := g.readiness(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"status": "unavailable", "reason": err.Error()})
		return
	}
	ready := map[string]any{"status": "ready", "tools": g.served}
	if nl := g.catalog.NotLoaded; len(nl) > 0 {
		// Ready with the rest: one upstream's outage must not take every
		// replica out of the balancer (see readiness).
		ready["not_loaded"] = notLoadedJSON(nl)
	}
	json.NewEncoder(w).Encode(ready)
}

func notLoadedJSON(nl []NotLoaded) []map[string]string {
	out := make([]map[string]string, len(nl))
	for i, n := range nl {
		out[i] = map[string]string{"upstream": n.Upstream, "error": n.Err.Error()}
	}
	return out
}

// readiness says why the gateway cannot serve tool calls, or nil: the
// catalog must be loaded, serve at least one tool, and every upstream that
// has tools must have a client.
//
// A remote upstream is ready once its document is loaded and its client
// built; readiness does not probe it. A probe per readiness check would
// couple every replica's readiness to the upstream's: one upstream blip would
// take all of them out of the load balancer at once, and callers would get
// connection errors instead of the gateway's clear "the upstream could not be
// reached (502)" result. How upstreams fare is in the metrics
// (mcpgate_tool_calls_total by outcome, mcpgate_upstream_responses_total).
func (g *Gateway) readiness() error {
	if g.catalog == nil {
		return errors.New("the catalog is not loaded")
	}
	if g.served == 0 && len(g.catalog.NotLoaded) > 0 {
		n := g.catalog.NotLoaded[0]
		return fmt.Errorf("no tool is served: upstream %s is not loaded (%v); retrying", n.Upstream, n.Err)
	}
	if g.served == 0 {
		// Every tool held back by the lock, or no operation exposed: a
		// replica like this answers every call "unknown tool", so a rolling
		// deploy should stop at it.
		return errors.New("no tool is served (none exposed, or all held back by the lock)")
	}
	for _, t := range g.catalog.Tools {
		if g.clients[t.Upstream] == nil {
			return fmt.Errorf("upstream %s has no client", t.Upstream)
		}
	}
	return nil
}
