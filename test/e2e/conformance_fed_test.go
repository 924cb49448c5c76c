package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestConformanceFederated runs the conformance suite's server scenarios
// through mcpgate federating go-sdk's conformance server (everything-server),
// an upstream `mcp: {url: …}` with `tool_prefix: ""`, so that its tools,
// prompts and resources are served under the names the scenarios call.
//
// The suite first runs against the server alone: a scenario it does not
// pass on its own says nothing about the gateway and is not judged. Then
// it runs through the gateway, stateful and stateless, and every other
// scenario is judged as TestConformance judges the demo's, but for those
// fedExcluded takes out of a mode; the checks in knownFailing are the gaps
// on record, each with its cause.
func TestConformanceFederated(t *testing.T) {
	b := setup(t)
	server := startConformanceServer(t)

	own := ownPasses(t, server)
	if len(own) == 0 {
		t.Fatal("the conformance server passes no scenario on its own")
	}

	cfg := filepath.Join(t.TempDir(), "mcpgate.yaml")
	if err := os.WriteFile(cfg, []byte(`upstreams:
  - name: conf
    tool_prefix: ""
    mcp: {url: "`+server+`"}
    auth: {mode: none}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"stateful", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"serve", "--config", cfg, "--addr", "127.0.0.1:0"}
			if mode == "stateful" {
				args = append(args, "--stateful")
			}
			url := startGateway(t, b.mcpgate, args)
			// One run of the suite, its scenarios one after the other: a
			// run of the CLI per scenario costs 1–2 s of Node's start on
			// 2 busy cores, a scenario ~0.1 s.
			dir, out, err := conformance(t, url, "--suite", "all")
			byScenario := results(t, dir)
			for _, sc := range own {
				t.Run(sc, func(t *testing.T) {
					if why, ok := fedExcluded[mode][sc]; ok {
						t.Skipf("%s (not judged: %s)", why, summary(byScenario[sc]))
					}
					checks, ran := byScenario[sc]
					if !ran {
						t.Fatalf("conformance --suite all did not run it: %v\n%s", err, out)
					}
					judge(t, sc, mode, checks, knownFailing[mode][sc], out)
				})
			}
		})
	}
}

// fedExcluded are the scenarios a mode does not run through the gateway,
// and why: what they test is not there in that mode, by design.
var fedExcluded = map[string]map[string]string{
	"stateless": {
		// A stateless POST has no session to send the caller a request
		// on, so the gateway offers the upstream no sampling or
		// elicitation capability (gateway/federation.go,
		// startFederation): the upstream's tool answers that its client
		// cannot be asked.
		"tools-call-sampling":          "server-to-client request (sampling/createMessage): a stateless gateway has no session to relay it on",
		"tools-call-elicitation":       "server-to-client request (elicitation/create): a stateless gateway has no session to relay it on",
		"elicitation-sep1034-defaults": "server-to-client request (elicitation/create): a stateless gateway has no session to relay it on",
		"elicitation-sep1330-enums":    "server-to-client request (elicitation/create): a stateless gateway has no session to relay it on",
		// It needs a session and its GET stream: a stateless gateway
		// issues no session and answers GET with 405, which TestConformance
		// checks of the gateway itself; the upstream plays no part.
		"server-sse-multiple-streams": "needs a session and SSE streams, which a stateless gateway does not have",
		// A stateless gateway has no session to send
		// notifications/resources/updated on, so it offers no
		// resources.subscribe and answers both methods -32601 saying so
		// (gateway/subscribe.go); TestSubscribeRefused checks that.
		"resources-subscribe":   "resources/subscribe: a stateless gateway has no session to send notifications/resources/updated on",
		"resources-unsubscribe": "resources/unsubscribe: a stateless gateway has no session to send notifications/resources/updated on (and the scenario subscribes first)",
	},
}

// knownFailing are the checks that fail through the gateway although the
// server passes them on its own, by mode and scenario: check ID → cause.
var knownFailing = map[string]map[string]map[string]string{}

func init() {
	// elicitation-sep1330-enums passes since the gateway relays an
	// elicitation without go-sdk's client checking its schema first (see
	// newClient in upstream/federation/session.go); resources-subscribe
	// and resources-unsubscribe since a stateful gateway relays
	// subscriptions (gateway/subscribe.go; a stateless one is fedExcluded).
	stateful := map[string]map[string]string{}
	knownFailing["stateful"] = map[string]map[string]string{}
	knownFailing["stateless"] = map[string]map[string]string{}
	for sc, checks := range stateful {
		knownFailing["stateful"][sc] = checks
	}
}

// startConformanceServer builds go-sdk's conformance server and starts it
// stateful (-stateless=false: its sampling and elicitation tools need a
// session to ask on), as cmd/mcpgate's TestCallConformanceServer does; it
// returns its /mcp URL.
func startConformanceServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "everything-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// It takes an address, not a listener: pick a free port, and try again
	// if another process takes it first.
	for attempt := 0; attempt < 3; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(bin, "-http", addr, "-stateless=false")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		up := func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		}
		for deadline := time.Now().Add(10 * time.Second); !up() && time.Now().Before(deadline); {
			select {
			case <-exited:
				deadline = time.Time{} // lost the port: try another
			case <-time.After(20 * time.Millisecond):
			}
		}
		select {
		case <-exited:
			continue
		default:
		}
		if up() {
			return "http://" + addr + "/mcp"
		}
	}
	t.Fatal("the conformance server did not listen")
	return ""
}

// ownPasses runs every scenario of the suite, pending ones too, against the
// server alone, and returns those it passes: at least one check succeeded
// and none failed or warned. The others are logged, with what they got.
func ownPasses(t *testing.T, url string) []string {
	t.Helper()
	dir, out, err := conformance(t, url, "--suite", "all")
	byScenario := results(t, dir)
	if len(byScenario) == 0 {
		t.Fatalf("conformance --suite all: %v: no results\n%s", err, out)
	}
	var passed []string
	for sc, checks := range byScenario {
		if ok, bad := tally(checks); ok > 0 && len(bad) == 0 {
			passed = append(passed, sc)
		} else {
			t.Logf("the conformance server does not pass %s on its own (%s): not judged through the gateway", sc, summary(checks))
		}
	}
	slices.Sort(passed)
	t.Logf("the conformance server passes %d scenarios on its own", len(passed))
	return passed
}

// tally counts the checks that succeeded, and names those that failed or
// warned.
func tally(checks []check) (ok int, bad []string) {
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			ok++
		case "INFO":
		default:
			bad = append(bad, c.Status+" "+c.ID)
		}
	}
	return ok, bad
}

func summary(checks []check) string {
	ok, bad := tally(checks)
	if len(bad) == 0 {
		return fmt.Sprintf("%d passed", ok)
	}
	return fmt.Sprintf("%d passed; %s", ok, strings.Join(bad, ", "))
}
