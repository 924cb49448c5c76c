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
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/examples/embedded/service"
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "embedded: listening on http://%s (MCP at http://%[1]s/mcp)\n", ln.Addr())

	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Serve returns as soon as Shutdown starts; wait for Shutdown itself,
	// which lets in-flight requests (tool calls included) finish.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
