// Package serve runs an example's HTTP server the way every example command
// does: listen first, say where on stderr, serve until SIGINT or SIGTERM,
// then shut down gracefully.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// shutdownGrace is how long in-flight requests (tool calls included) get to
// finish once a signal arrives.
const shutdownGrace = 5 * time.Second

// Run listens on addr and prints "NAME: listening on http://ADDR" to stderr,
// then note if any (a format whose one verb is the bound address), so that
// port 0 picks a free port a test can read. It serves h until ctx is done,
// then shuts down and waits for in-flight requests, at most shutdownGrace.
func Run(ctx context.Context, name, addr, note string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("%s: listening on http://%s", name, ln.Addr())
	if note != "" {
		line += " " + fmt.Sprintf(note, ln.Addr())
	}
	fmt.Fprintln(os.Stderr, line)

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Serve returns as soon as Shutdown starts; wait for Shutdown itself,
	// which lets in-flight requests finish.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
