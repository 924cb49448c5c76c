// Command orchestrator serves the example orchestrator-style API standalone, so
// that mcpgate can front it over the network (remote mode):
//
//	go run ./examples/orchestrator [--addr 127.0.0.1:9000] [--token T] [--record-requests]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/examples/orchestrator/api"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen `HOST:PORT`")
	token := flag.String("token", "", "require this bearer token on /api/ requests")
	record := flag.Bool("record-requests", false, "record requests for GET /_debug/requests (tests only: records tokens)")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orchestrator: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "orchestrator: listening on http://%s\n", ln.Addr())
	srv := &http.Server{
		Handler:           api.New(&api.Options{Token: *token, RecordRequests: *record}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "orchestrator: %v\n", err)
		os.Exit(1)
	}
}
