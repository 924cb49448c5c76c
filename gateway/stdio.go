package gateway

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/mcpgate/mcpgate/gateway/stdio"
)

// The stdio transport lives in package gateway/stdio; these names keep the
// API that embedders use.
type (
	// StdioOptions is [stdio.Options].
	StdioOptions = stdio.Options
	// StdioTransport is [stdio.Transport].
	StdioTransport = stdio.Transport
)

// DefaultMaxLineBytes is [stdio.DefaultMaxLineBytes].
const DefaultMaxLineBytes = stdio.DefaultMaxLineBytes

// NewStdioTransport is [stdio.NewTransport].
func NewStdioTransport(r io.Reader, w io.Writer, opts *StdioOptions) *StdioTransport {
	return stdio.NewTransport(r, w, opts)
}

// ServeStdio serves the gateway over newline-delimited JSON-RPC on r and w
// (stdin and stdout for `mcpgate stdio`) through a [StdioTransport], whose
// fast path (stdioFast) answers the tools/call lines it takes; go-sdk serves
// the rest. It serves until r
// ends or a shutdown request, having answered every call it read; then it
// returns nil. The calls still running then get the longest upstream timeout
// plus five seconds to be answered. When ctx is done first, go-sdk closes the
// session (the calls in flight finish, unanswered) and ServeStdio returns
// ctx's error.
func (g *Gateway) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	var drain time.Duration
	for _, u := range g.cfg.Upstreams {
		drain = max(drain, u.Timeout) // Validate filled in the unset ones
	}
	if drain == 0 {
		drain = DefaultTimeout
	}
	t := NewStdioTransport(r, w, &StdioOptions{Logger: g.logger, DrainTimeout: drain + 5*time.Second, Fast: g.stdioFast()})
	err := g.Server().Run(ctx, t)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
