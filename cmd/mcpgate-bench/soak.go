package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// runSoak is `mcpgate-bench soak`: mixed calls against mcpgate for a long
// while, then the checks of issue 9 item 6. It returns an error (so the
// command exits 1) when a check fails.
func runSoak(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mcpgate-bench soak", flag.ContinueOnError)
	duration := fs.Duration("duration", 60*time.Second, "measured soak time")
	warmup := fs.Duration("warmup", 10*time.Second, "load before the RSS and goroutine baselines are taken")
	c := fs.Int("c", 64, "concurrent workers, each its own MCP session")
	slow := fs.Duration("slow", 100*time.Millisecond, "delay of the upstream's slow route")
	maxGrowth := fs.Float64("rss-growth", 0.10, "largest allowed RSS growth under load, from after warm-up to the end, as a fraction")
	slack := fs.Int("goroutine-slack", 5, "goroutines allowed above the after-warm-up count at the end")
	protocol := fs.String("protocol", "2025-06-18", "MCP protocol version the workers ask for")
	bin := fs.String("mcpgate-bin", "", "mcpgate `binary` to run (default: build ./cmd/mcpgate)")
	logLevel := fs.String("mcpgate-log-level", "info", "mcpgate's --log-level")
	stateful := fs.Bool("stateful", false, "run mcpgate with --stateful")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *c < 1 || *c > 4096 {
		return fmt.Errorf("-c: %d is not a concurrency between 1 and 4096", *c)
	}
	s, err := startServers(ctx, setupOptions{slow: *slow, mcpgate: true, mcpgateBin: *bin, mcpgateLog: *logLevel, stateful: *stateful})
	if err != nil {
		return err
	}
	defer s.close()
	t := &target{name: "mcpgate", url: s.mcpgate.url + "/mcp", proc: s.mcpgate, up: s.upstream}
	base := s.mcpgate.url

	fmt.Fprintf(out, "soak: mcpgate, %d workers of mixed calls (tools/list, reads, writes, upstream 500s, a %s slow route), %s after %s warm-up (a shared machine: rates are noisy)\n",
		*c, *slow, *duration, *warmup)
	gStart, haveG := goroutines(base)

	// RSS is sampled about once a second under load. Growth compares the
	// median of the warm-up's second half with the median of the run's last
	// quarter, both under load: a leak shows as a slope, while the sawtooth
	// of the GC and the heap the scavenger has not yet returned are in both.
	// (Idle readings right after the load stops depend on when the last GC
	// and scavenge ran: they are printed, not judged.)
	var warmRSS, runRSS []int64
	sampler := func(into *[]int64) func() {
		return func() {
			if v, err := s.mcpgate.rss(); err == nil {
				*into = append(*into, v)
			}
		}
	}
	spec := &loadSpec{target: t, c: *c, mode: "mixed", duration: *warmup, protocol: *protocol, listSize: 4, sample: sampler(&warmRSS)}
	warm, err := runLoad(ctx, spec)
	if err != nil {
		return fmt.Errorf("soak warm-up: %v%s", err, mcpgateLog(t))
	}
	g0 := settledGoroutines(ctx, base, -1)
	idle0, err := s.mcpgate.rss()
	if err != nil {
		return err
	}

	spec.duration, spec.sample = *duration, sampler(&runRSS)
	r, err := runLoad(ctx, spec)
	if err != nil {
		return fmt.Errorf("soak: %v%s", err, mcpgateLog(t))
	}
	g1 := settledGoroutines(ctx, base, g0+*slack)
	idle1, err := s.mcpgate.rss()
	if err != nil {
		return err
	}
	rss0, rss1 := idle0, idle1 // too short a run to sample under load: idle readings
	if len(warmRSS) > 0 && len(runRSS) > 0 {
		rss0 = median(warmRSS[len(warmRSS)/2:])
		rss1 = median(runRSS[len(runRSS)-max(1, len(runRSS)/4):])
	}

	var failed []string
	fmt.Fprintf(out, "calls: %d (%.0f req/s), p50 %.3f ms, p90 %.3f ms, p99 %.3f ms; cpu %.0f µs/call\n",
		r.calls, r.rate(), ms(r.pct(0.5)), ms(r.pct(0.9)), ms(r.pct(0.99)), r.perCall(r.targetCPU))
	fmt.Fprintf(out, "errors: %d (warm-up %d); expected isError answers (failItem): %d; wrong-client answers: %d (warm-up %d)\n",
		r.errors, warm.errors, r.expectedErrors, r.wrong, warm.wrong)
	if n := r.errors + warm.errors; n > 0 {
		failed = append(failed, fmt.Sprintf("%d errors", n))
	}
	if n := r.wrong + warm.wrong; n > 0 {
		failed = append(failed, fmt.Sprintf("%d wrong-client answers", n))
	}
	if r.expectedErrors == 0 {
		failed = append(failed, "no failItem call came back as isError")
	}
	for _, p := range append(warm.problems(), r.problems()...) {
		fmt.Fprintln(out, p)
	}

	growth := float64(rss1-rss0) / float64(rss0)
	verdict := "ok"
	if growth >= *maxGrowth {
		verdict = "FAIL"
		failed = append(failed, fmt.Sprintf("RSS grew %.1f%%, limit %.0f%%", 100*growth, 100**maxGrowth))
	}
	fmt.Fprintf(out, "rss under load: %.1f MiB after warm-up, %.1f MiB at the end (medians): %+.1f%% (limit %.0f%%): %s\n",
		mib(rss0), mib(rss1), 100*growth, 100**maxGrowth, verdict)
	fmt.Fprintf(out, "rss idle: %.1f MiB after warm-up, %.1f MiB at the end; under load, MiB each second: %s\n",
		mib(idle0), mib(idle1), mibSeries(runRSS))

	if !haveG || g0 < 0 || g1 < 0 {
		fmt.Fprintln(out, "goroutines: not measured (no /metrics)")
	} else {
		verdict = "ok"
		if g1 > g0+*slack {
			verdict = "FAIL"
			failed = append(failed, fmt.Sprintf("goroutines %d at the end, %d after warm-up (slack %d)", g1, g0, *slack))
		}
		fmt.Fprintf(out, "goroutines: %d before any load, %d after warm-up, %d at the end (limit %d): %s\n", gStart, g0, g1, g0+*slack, verdict)
	}
	if len(failed) > 0 {
		fmt.Fprintln(out, "soak: FAIL")
		return errors.New("soak failed: " + strings.Join(failed, "; "))
	}
	fmt.Fprintln(out, "soak: PASS")
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func mibSeries(v []int64) string {
	s := make([]string, len(v))
	for i, b := range v {
		s[i] = fmt.Sprintf("%.1f", mib(b))
	}
	return strings.Join(s, " ")
}

// median of v (v is not modified).
func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// goroutines reads go_goroutines from base/metrics.
func goroutines(base string) (int, bool) {
	m, ok := scrapeMetrics(base)
	if !ok {
		return -1, false
	}
	v, ok := m["go_goroutines"]
	if !ok {
		return -1, false
	}
	return int(v), true
}

// settledGoroutines waits for the target's goroutines to settle once the
// load stopped (the driver has closed its connections, whose server
// goroutines take a moment to end): until the count is at most limit, or,
// with limit < 0, the same on two reads 250 ms apart; at most 10 s. It
// returns -1 when /metrics does not say.
func settledGoroutines(ctx context.Context, base string, limit int) int {
	prev := -1
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, ok := goroutines(base)
		if !ok {
			return -1
		}
		if limit >= 0 && n <= limit || limit < 0 && n == prev || time.Now().After(deadline) {
			return n
		}
		prev = n
		sleep(ctx, 250*time.Millisecond)
		if ctx.Err() != nil {
			return n
		}
	}
}
