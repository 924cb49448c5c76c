// Command mcpgate-bench measures mcpgate against the two bounds of issue 9,
// side by side in one run, all on 127.0.0.1:
//
//   - direct: the recording upstream itself, called as plain REST
//     (GET /items/{id}?q=...): the limit, what the API costs without any
//     MCP in front;
//   - baseline: an SDK-free Go pass-through (no go-sdk, no session) that
//     parses one JSON-RPC tools/call with encoding/json, forwards it with
//     net/http and answers content text + structuredContent: the floor any
//     MCP gateway pays;
//   - mcpgate: ./cmd/mcpgate, built into a temporary directory (or
//     -mcpgate-bin), serving the upstream's OpenAPI document from a
//     generated config (`serve --config F --addr 127.0.0.1:0`).
//
// and, asked for with -targets, the federated comparison:
//
//   - mcp: a go-sdk server (mcp.NewServer behind NewStreamableHTTPHandler,
//     stateless, JSON answers) with the upstream's four tools as MCP tools of
//     the same names and arguments, called directly;
//   - federated: mcpgate serving a generated config that federates that
//     server (`mcp: {url: …}`, tool_prefix "", auth none), so its tools are
//     served under their own names and every call is relayed to it;
//   - mcp-relay: the floor under federated, an SDK-free byte relay in front
//     of the same server (relay.go): each POST's bytes and the Streamable
//     HTTP headers forwarded on a kept-alive connection, the answer copied
//     back, nothing parsed or checked.
//
// and, asked for with -targets, issue 25's point 7 (every mode at the fast
// path's speed; modes.go):
//
//   - stateful: mcpgate --stateful with the mcpgate target's config, compared
//     with the baseline (req/s at c=8 ≥ 0.7×, ≤ 30 KB allocated per call);
//   - stdio: `mcpgate stdio` with the mcpgate target's config: one child, one
//     session, the c workers' calls in flight at once on its stdin, compared
//     with the mcpgate target, the HTTP fast path (req/s at c=8 ≥ 0.8×);
//   - playbook, noetl: one mcpgate serving the example playbook engine
//     (examples/playbooks, a process of its own); demo/fast called over /mcp
//     and on the NoETL-compatible endpoint; mcpgate's CPU per call over /mcp
//     ≤ 1.2× the endpoint's at c=8 (mode call only);
//
// and with -sessions N, the RSS per idle stateful session of a fresh
// mcpgate --stateful holding N open sessions (≤ 10 KB; issue 25 reads it at
// N = 10000). Each figure is printed with its target and met or MISSED:
//
//	go run ./cmd/mcpgate-bench -targets baseline,mcpgate,stateful,stdio,playbook,noetl -c 8 -sessions 10000 -rounds 3
//
// The upstream, the baseline and the go-sdk server run as this binary
// re-executed with a hidden subcommand, so each target has its own process
// and its CPU is read from /proc/<pid>/stat apart from the driver's (Linux
// only). The go-sdk server counts the handshakes it answers (initialize and
// server/discover requests) on GET /_count.
//
// Usage:
//
//	go run ./cmd/mcpgate-bench [flags]        # the table and the ratios
//	go run ./cmd/mcpgate-bench -list-spec ../shared/corpus/github-api-2020.json
//	go run ./cmd/mcpgate-bench soak [flags]   # issue 9 item 6; exit 1 on a failed check
//	go run ./cmd/mcpgate-bench startup [flags] # process start to /readyz 200, full load vs snapshot
//
// Flags of the table (defaults in brackets): -c concurrencies [1,8,32];
// -duration measured time per row [5s]; -warmup unmeasured load before each
// row [1s]; -mode call (tools/call of the GET), list (tools/list) or mixed
// (per ten calls: one list, one write, one upstream 500, one slow read, six
// reads) [call]; -targets direct, baseline, mcpgate, mcp, federated,
// mcp-relay, mcpgate-redis, stateful, stdio, playbook, noetl [direct,baseline,mcpgate];
// -sessions N [0: not measured]; -slow delay of the
// slow route [100ms]; -protocol [2025-06-18]; -mcpgate-bin; -mcpgate-log-level
// [info, mcpgate's own default]; -stateful; -list-spec FILE also times
// tools/list at c=1 of mcpgate serving FILE with --all; -rounds N measures
// every row N times in turn against the same processes [1].
//
// The load driver speaks Streamable HTTP like an MCP client: each worker does
// its own initialize (keeping Mcp-Session-Id if one is given) and
// notifications/initialized, its request ids restart at 1, answers may be
// application/json or text/event-stream. Every call carries a value no other
// call carries, and every answer is checked for that value and the call's
// own id (the stdio target's workers share its one session, each with ids
// of its own). Workers share one http.Client with an idle connection per worker
// and rebuild their request bodies in place, so the driver is not the limit
// (its own CPU per call is a column).
//
// Columns of the table, one row per target and concurrency:
//
//	target            direct, baseline, mcpgate, mcp, federated, mcp-relay,
//	                  mcpgate-redis, stateful, stdio, playbook or noetl
//	c                 concurrent workers, each with its own session
//	req/s             calls completed per second of the measured window
//	p50/p90/p99 ms    latency of one call, from the driver (send to last byte)
//	errors            transport errors, non-200 answers, JSON-RPC errors,
//	                  isError results where a success was due
//	wrong             wrong-client answers: another id, or another call's value
//	                  (must be 0)
//	cpu µs/call       user+system CPU of the target's process per call (for
//	                  direct: the upstream's), from /proc/<pid>/stat in 10 ms
//	                  ticks over the measured window
//	upstream µs/call  the same for the upstream behind the baseline or mcpgate
//	                  (for federated: the go-sdk server; for playbook and
//	                  noetl: the playbook engine)
//	driver µs/call    the same for this process: what the load costs to make
//	alloc KB/call     bytes the target's Go heap allocated per call, from
//	                  go_memstats_alloc_bytes_total on its /metrics; "-" when
//	                  the target has no /metrics (stdio)
//
// After the table come the ratios of issue 9's targets:
//
//	ratio mcpgate/baseline req/s c=N                 per concurrency (target ≥ 0.8 at c=8, 32)
//	ratio mcpgate/baseline p50 added latency c=1     (mcpgate p50 − direct p50) /
//	                                                 (baseline p50 − direct p50) (target ≤ 1.3)
//
// With the mcp and federated targets, the federation issue's acceptance:
//
//	ratio federated/mcp req/s c=N                    per concurrency (target ≥ 0.8 at c=8)
//	federated added p50 c=1 ms                       federated p50 − mcp p50 (target ≤ 0.3)
//	federated c=N handshakes during the measured window
//	                                                 initialize and server/discover requests
//	                                                 the go-sdk server answered while the
//	                                                 row was measured (target 0)
//
// With mcp-relay beside them, the floor (no target: what any HTTP hop in
// front of that server costs on the machine):
//
//	ratio mcp-relay/mcp req/s c=N                    per concurrency
//	ratio federated/mcp-relay req/s c=N              mcpgate against the floor
//	mcp-relay added p50 c=1 ms                       mcp-relay p50 − mcp p50
//
// With -rounds N (N > 1) each round prints its rows and ratios (every other
// round measures the rows in reverse order, so that no target always runs
// right after the same other), and the end each ratio's median over the
// rounds, its range and every round's value:
//
//	over N rounds, ratio mcpgate/baseline p50 added latency c=1: median 1.27, range 1.22-1.31 (1.22 1.29 ...)
//
// One round's latency ratio moves by ±0.05 between runs on this project's
// 2-core machine, mostly with the baseline's own added latency (0.15-0.18
// ms); the median of a few rounds is the figure to compare.
//
// soak runs 60 s (-duration) at c=64 (-c) of mixed calls against mcpgate
// after a 10 s warm-up (-warmup), and fails (exit 1) on:
//   - any error other than the expected isError answers of the failing route;
//   - any wrong-client answer;
//   - RSS growth of 10% or more (-rss-growth): VmRSS from /proc/<pid>/status,
//     sampled each second under load, median of the warm-up's second half
//     against median of the run's last quarter (idle readings just after the
//     load are printed too, but they swing with the last GC and scavenge);
//   - go_goroutines, read from mcpgate's /metrics once the driver has closed
//     its connections, above the same reading after warm-up plus 5
//     (-goroutine-slack). After warm-up, not before any load, so that the
//     upstream connection pool counts in both. Without /metrics (not 200) it
//     prints "goroutines: not measured (no /metrics)" and does not fail.
//
// Timings on a shared machine are noisy: compare rows of one run only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && runRole(os.Args[1]) {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == "soak" {
		err = runSoak(ctx, os.Args[2:], os.Stdout)
	} else if len(os.Args) > 1 && os.Args[1] == "startup" {
		err = runStartup(ctx, os.Args[2:], os.Stdout)
	} else {
		err = runBench(ctx, os.Args[1:], os.Stdout)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpgate-bench: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// runRole serves a hidden role when name is one, and reports whether it was.
// The test binary calls it from TestMain, so re-executing works there too.
func runRole(name string) bool {
	var h func(string) http.Handler
	switch name {
	case roleUpstream:
		delay, err := time.ParseDuration(os.Getenv("MCPGATE_BENCH_SLOW"))
		if err != nil {
			delay = 100 * time.Millisecond
		}
		h = func(base string) http.Handler { return newUpstreamServer(base, delay).handler() }
	case roleBaseline:
		up := os.Getenv("MCPGATE_BENCH_UPSTREAM")
		h = func(string) http.Handler { return newBaseline(up).handler() }
	case rolePlaybooks:
		h = playbooksHandler
	case roleMCP:
		delay, err := time.ParseDuration(os.Getenv("MCPGATE_BENCH_SLOW"))
		if err != nil {
			delay = 100 * time.Millisecond
		}
		h = func(string) http.Handler { return (&mcpServer{delay: delay}).handler() }
	case roleRelay:
		up := os.Getenv("MCPGATE_BENCH_UPSTREAM")
		h = func(string) http.Handler { return newRelay(up).handler() }
	default:
		return false
	}
	if err := serveRole(h); err != nil {
		fmt.Fprintf(os.Stderr, "mcpgate-bench %s: %v\n", name, err)
		os.Exit(1)
	}
	return true
}
