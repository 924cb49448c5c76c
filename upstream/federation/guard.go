package federation

import (
	"fmt"
	"io"
	"net/http"
)

// guard is the transport of every HTTP upstream, under each session's
// credential: it reaches the configured endpoint's origin only — a legacy
// SSE endpoint event or a redirect that names another origin is refused,
// so that callers' arguments go nowhere else from the gateway's place in
// the network — and it bounds each answer's body (Config.MaxResponseBytes).
type guard struct {
	base   http.RoundTripper
	origin string
	name   string
	max    int64
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if origin(req.URL.String()) != g.origin {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, fmt.Errorf("federation: upstream %q: refusing a request to an origin other than the configured endpoint's (%s)", g.name, g.origin)
	}
	resp, err := g.base.RoundTrip(req)
	if err == nil && resp.Body != nil && g.max > 0 {
		resp.Body = &cappedBody{rc: resp.Body, left: g.max, max: g.max, name: g.name}
	}
	return resp, err
}

// cappedBody fails a read past max bytes: an answer that large is refused
// rather than held, whatever go-sdk's reader would have done with it.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
	max  int64
	name string
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooLarge()
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the bound tells "exactly max" from "more"
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n, b.left = int(b.left), -1
		return n, b.tooLarge()
	}
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) tooLarge() error {
	// An answer that arrived, and is refused: not a lost session.
	return &hostileError{fmt.Sprintf("federation: upstream %q: answer over max_response_bytes (%d bytes): cut", b.name, b.max)}
}

func (b *cappedBody) Close() error { return b.rc.Close() }
