package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// runStartup measures how long `mcpgate serve` takes from the start of its
// process to the first 200 of /readyz, for each OpenAPI document, from the
// document (full) and from a snapshot `mcpgate build` wrote (snapshot);
// docs/snapshot.md has the figures. Every start is its own process; the
// rounds alternate full and snapshot so that a busy spell of this shared
// machine lands on both.
//
//	go run ./cmd/mcpgate-bench startup [-rounds 5] [-specs a.json,b.json] [-modes full,snapshot]
func runStartup(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mcpgate-bench startup", flag.ContinueOnError)
	specs := fs.String("specs", "../shared/corpus/kubernetes-swagger-2.0.json,../shared/corpus/stripe-spec3-2022.json", "comma-separated OpenAPI `documents`, each served with --all")
	rounds := fs.Int("rounds", 5, "starts per document and mode")
	bin := fs.String("mcpgate-bin", "", "mcpgate `binary` to run (default: build ./cmd/mcpgate)")
	modesFlag := fs.String("modes", "full,snapshot", "comma-separated `modes` to time: full (from the documents), snapshot")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	modes := strings.Split(*modesFlag, ",")
	for _, m := range modes {
		if m != "full" && m != "snapshot" {
			return fmt.Errorf("-modes: %q is neither full nor snapshot", m)
		}
	}
	if *rounds < 1 || *rounds > 1000 {
		return fmt.Errorf("-rounds: %d is not between 1 and 1000", *rounds)
	}
	dir, err := os.MkdirTemp("", "mcpgate-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		if *bin, err = buildMcpgate(ctx, dir); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "ms from process start to /readyz 200 (wall), and the CPU the process had used by then (user+system, 10 ms ticks); %d starts each\n", *rounds)
	fmt.Fprintf(out, "%-32s %-9s %8s %8s %8s %12s %12s\n", "document", "mode", "min", "median", "max", "cpu median", "cpu max")
	for _, spec := range strings.Split(*specs, ",") {
		if _, err := os.Stat(spec); err != nil {
			return fmt.Errorf("-specs: %v", err)
		}
		snap := filepath.Join(dir, filepath.Base(spec)+".snapshot")
		serve := []string{"--openapi", spec, "--all", "--upstream", "http://127.0.0.1:1"}
		build := exec.CommandContext(ctx, *bin, append(append([]string{"build"}, serve...), "-o", snap)...)
		if msg, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("mcpgate build %s: %v: %s", spec, err, strings.TrimSpace(string(msg)))
		}
		times, cpus := map[string][]time.Duration{}, map[string][]time.Duration{}
		for range *rounds {
			for _, mode := range modes {
				args := slices.Clone(serve)
				if mode == "snapshot" {
					args = append(args, "--snapshot", snap)
				}
				d, cpu, err := timeToReady(ctx, *bin, dir, mode == "snapshot", args...)
				if err != nil {
					return fmt.Errorf("%s %s: %v", filepath.Base(spec), mode, err)
				}
				times[mode], cpus[mode] = append(times[mode], d), append(cpus[mode], cpu)
			}
		}
		for _, mode := range modes {
			ts, cs := times[mode], cpus[mode]
			slices.Sort(ts)
			slices.Sort(cs)
			fmt.Fprintf(out, "%-32s %-9s %8.1f %8.1f %8.1f %12.0f %12.0f\n", filepath.Base(spec), mode, ms(ts[0]), ms(ts[len(ts)/2]), ms(ts[len(ts)-1]), ms(cs[len(cs)/2]), ms(cs[len(cs)-1]))
		}
	}
	return nil
}

// timeToReady starts `mcpgate serve args…` on a free port and returns the
// time from the process's start to its first /readyz 200, and the CPU the
// process had used by then. With snapshot, the
// log must say the catalog came from the snapshot: a start that fell back
// to the documents would be timed as the wrong thing.
func timeToReady(ctx context.Context, bin, dir string, snapshot bool, args ...string) (wall, cpu time.Duration, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(dir, "startup.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, 0, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr}, args...)...)
	// /readyz is asked once the process says it listens, not from its
	// first millisecond on: a poller that dials every millisecond takes
	// its share of the two cores the start runs on (15–20 ms of a
	// Kubernetes start here, measured with both ways in the same minutes).
	// The time is still the process's start to its first /readyz 200.
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, 0, err
	}
	cmd.Stdout = logf
	setDeathSignal(cmd)
	client := &http.Client{Timeout: time.Second}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !said && strings.HasPrefix(sc.Text(), "mcpgate: listening on ") {
				said = true
				close(listening)
			}
		}
		if !said {
			close(listening) // it ended without listening: the polling below says so
		}
	}()
	select {
	case <-listening:
	case <-time.After(60 * time.Second):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	url := "http://" + addr + "/readyz"
	for deadline := start.Add(60 * time.Second); time.Now().Before(deadline); {
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				wall = time.Since(start)
				if cpu, err = procCPU(cmd.Process.Pid); err != nil {
					return 0, 0, err
				}
				if log, _ := os.ReadFile(logPath); snapshot != strings.Contains(string(log), "catalog from snapshot") {
					return 0, 0, fmt.Errorf("snapshot used: %v, want %v: %s", !snapshot, snapshot, log)
				}
				return wall, cpu, nil
			}
		}
		time.Sleep(time.Millisecond) // polling a condition: connection refused until it listens
	}
	log, _ := os.ReadFile(logPath)
	return 0, 0, fmt.Errorf("not ready after 60s: %s", log)
}
