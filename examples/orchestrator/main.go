// Command orchestrator serves the example orchestrator-style API (package
// api) standalone, so that mcpgate can front it over the network:
//
//	go run ./examples/orchestrator [--addr 127.0.0.1:9000] [--token T] [--record-requests]
//
// It listens first and then prints one line to stderr,
//
//	orchestrator: listening on http://127.0.0.1:9000
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
	"github.com/mcpgate/mcpgate/examples/orchestrator/api"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen on `HOST:PORT` (port 0: any free port)")
	token := flag.String("token", "", "require `TOKEN` as a bearer token on /api/ requests")
	record := flag.Bool("record-requests", false, "serve the last 100 /api/ requests at /_debug/requests, Authorization included (tests only)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "orchestrator: unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	}
	if err := run(*addr, &api.Options{Token: *token, RecordRequests: *record}); err != nil {
		fmt.Fprintf(os.Stderr, "orchestrator: %v\n", err)
		os.Exit(1)
	}
}

func run(addr string, opts *api.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve.Run(ctx, "orchestrator", addr, "", api.New(opts).Handler())
}
