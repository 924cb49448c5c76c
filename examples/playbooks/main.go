// Command playbooks serves the example playbook engine (package engine)
// standalone, so that mcpgate can front it over the network:
//
//	go run ./examples/playbooks [--addr 127.0.0.1:8082] [--token T] [--step 1s] [--numeric-ids]
//
// It listens first and then prints one line to stderr,
//
//	playbooks: listening on http://127.0.0.1:8082
//
// with the bound address, so that --addr 127.0.0.1:0 picks a free port that
// a test can read. SIGINT or SIGTERM shuts it down gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpgate/mcpgate/examples/internal/serve"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8082", "listen on `HOST:PORT` (port 0: any free port)")
	token := flag.String("token", "", "require `TOKEN` as a bearer token on /api/ requests")
	step := flag.Duration("step", engine.DefaultStep, "how long each step of demo/slow takes")
	numeric := flag.Bool("numeric-ids", false, "answer execution ids as JSON integers above 2^53, as snowflake-id engines do")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "playbooks: unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	if err := run(*addr, &engine.Options{Token: *token, Step: *step, NumericIDs: *numeric}); err != nil {
		fmt.Fprintf(os.Stderr, "playbooks: %v\n", err)
		os.Exit(1)
	}
}

func run(addr string, opts *engine.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve.Run(ctx, "playbooks", addr, "", engine.New(opts).Handler())
}
