// Command embedded runs a small notes service that serves its own REST API
// and the mcpgate gateway beside it, in one process (package service):
//
//	go run ./examples/embedded --token secret [--addr 127.0.0.1:8090]
//
// REST clients use /api/notes; MCP clients connect to /mcp; both send
// "Authorization: Bearer secret", which the API checks itself. It listens
// first and then prints one line to stderr,
//
//	embedded: listening on http://127.0.0.1:8090 (MCP at http://127.0.0.1:8090/mcp)
//
// with the bound address, so that --addr 127.0.0.1:0 picks a free port that a
// test can read. SIGINT or SIGTERM shuts it down gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpgate/mcpgate/examples/embedded/service"
	"github.com/mcpgate/mcpgate/examples/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen on `HOST:PORT` (port 0: any free port)")
	token := flag.String("token", "", "the bearer `TOKEN` every /api/ route requires, REST or MCP (required)")
	flag.Parse()
	switch {
	case flag.NArg() > 0:
		fmt.Fprintf(os.Stderr, "embedded: unexpected arguments: %v\n", flag.Args())
		os.Exit(2)
	case *token == "":
		fmt.Fprintln(os.Stderr, "embedded: --token is required (the API checks it on every /api/ route)")
		os.Exit(2)
	}
	if err := run(*addr, *token); err != nil {
		fmt.Fprintf(os.Stderr, "embedded: %v\n", err)
		os.Exit(1)
	}
}

func run(addr, token string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	svc, err := service.New(ctx, &service.Options{Token: token, Logger: logger})
	if err != nil {
		return err
	}
	return serve.Run(ctx, "embedded", addr, "(MCP at http://%s/mcp)", svc.Handler())
}
