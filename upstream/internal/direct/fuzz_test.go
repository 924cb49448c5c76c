package direct

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzTransportDifferential answers one request with bytes from the fuzzer,
// the same bytes through the direct transport and through net/http's
// (upstream.NewTransport's settings), and requires the two to agree: both
// fail, or both succeed with the same status, protocol, headers, framing
// (ContentLength, TransferEncoding, Close), body bytes, read error and
// trailers. The server reads the request, writes the bytes and closes its
// side: an answer cut short ends in EOF, never in a wait.
//
// Where the two may differ, the rule is here, with why (keep this list
// short; a difference outside it is a bug in the direct transport):
//
//   - A final 101 Switching Protocols: net/http returns it and hands the
//     connection over to the caller; the direct transport refuses it, since
//     the gateway never asks to switch and has nothing to switch to.
//
// Not a rule but a setting: the net/http transport here asks for no gzip
// (DisableCompression), as the direct one asks for none. upstream's asks
// for gzip and unpacks a gzip answer; that is a difference in the request
// sent, documented in the package doc, not in how an answer is read.
//
// Then the direct transport alone is held to what its pool must do. A GET
// that follows must get the server's "ok": the server closed the first
// connection, so the GET goes on a new one, or is sent again on a new one
// when it met the close. And bytes left over from an answer must never be
// read as the next one: when the answer ends by its own framing (a length,
// chunks, or no body: no wait for the close), the server sends it again on
// a connection it keeps open, and the direct transport must read the same
// answer, then "ok" to a GET that follows, on that connection or a new one.
// (net/http is not held to this: its reader goroutine may take bytes that
// arrive on a pooled connection as the answer to a request just sent on it.)
func FuzzTransportDifferential(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed.method, []byte(seed.answer))
	}
	srv := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, method uint8, answer []byte) {
		srv.answer.Store(&answer)
		m, body := fuzzMethod(method)
		nt := NetHTTP()
		nt.DisableCompression = true
		defer nt.CloseIdleConnections()
		d := newTransport(srv.url)
		defer d.CloseIdleConnections()

		nr := srv.send(t, nt, m, "/close", body)
		dr := srv.send(t, d, m, "/close", body)
		if !dr.agrees(nr) {
			t.Fatalf("%s %q:\ndirect:   %s\nnet/http: %s", m, answer, dr, nr)
		}
		if next := srv.send(t, d, http.MethodGet, "/ok", ""); !reflect.DeepEqual(next, okResult) {
			t.Fatalf("%s %q, then GET: direct: %s, want %s", m, answer, next, okResult)
		}
		if dr.Failed || dr.ReadErr != "" || dr.ContentLength < 0 && len(dr.TransferEncoding) == 0 && m != http.MethodHead {
			return // the answer ends at the close, or not at all
		}
		d.CloseIdleConnections()
		if kr := srv.send(t, d, m, "/keep", body); !reflect.DeepEqual(kr, dr) {
			t.Fatalf("%s %q, on a connection kept open:\ndirect: %s\nwant    %s (as when closed)", m, answer, kr, dr)
		}
		if next := srv.send(t, d, http.MethodGet, "/ok", ""); !reflect.DeepEqual(next, okResult) {
			t.Fatalf("%s %q, then GET: direct: %s, want %s", m, answer, next, okResult)
		}
	})
}

// okResult is the answer to /ok.
var okResult = fuzzResult{Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1",
	Header: http.Header{"Content-Length": {"2"}}, ContentLength: 2, Body: "ok"}

// fuzzMethod is the request a fuzz input sends: GET, HEAD (framed without a
// body whatever the headers say), or a POST with a small body.
func fuzzMethod(b uint8) (method, body string) {
	switch b % 3 {
	case 1:
		return http.MethodHead, ""
	case 2:
		return http.MethodPost, `{"a":1}`
	}
	return http.MethodGet, ""
}

// fuzzResult is what a transport made of an answer.
type fuzzResult struct {
	Failed           bool // RoundTrip returned an error
	Err              string
	Status           string
	StatusCode       int
	Proto            string
	Header           http.Header
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Body             string
	ReadErr          string // reading the body: "" for io.EOF
	Trailer          http.Header
}

func (r fuzzResult) String() string {
	if r.Failed {
		return "failed: " + r.Err
	}
	return fmt.Sprintf("%q %s header %q length %d te %q close %t body %q read error %q trailer %q",
		r.Status, r.Proto, r.Header, r.ContentLength, r.TransferEncoding, r.Close, r.Body, r.ReadErr, r.Trailer)
}

// agrees reports whether r, the direct transport's result, agrees with
// n, net/http's, under the rules in FuzzTransportDifferential's doc.
func (r fuzzResult) agrees(n fuzzResult) bool {
	if !n.Failed && n.StatusCode == http.StatusSwitchingProtocols {
		return r.Failed // the direct transport refuses a 101
	}
	if r.Failed || n.Failed {
		return r.Failed == n.Failed // the errors' words differ
	}
	return reflect.DeepEqual(r, n)
}

// fuzzServer answers requests for /close with the fuzzer's bytes, then
// closes its side of the connection; requests for /keep with the same bytes,
// keeping the connection open; and any other request with "ok".
type fuzzServer struct {
	ln     net.Listener
	url    *url.URL
	answer atomic.Pointer[[]byte]
}

func newFuzzServer(f *testing.F) *fuzzServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	s := &fuzzServer{ln: ln, url: &url.URL{Scheme: "http", Host: ln.Addr().String()}}
	var wg sync.WaitGroup
	var open sync.Map
	f.Cleanup(func() {
		ln.Close()
		open.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			open.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer open.Delete(c)
				defer c.Close()
				s.serve(c.(*net.TCPConn))
			}()
		}
	}()
	return s
}

func (s *fuzzServer) serve(c *net.TCPConn) {
	br := bufio.NewReader(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/close":
			c.Write(*s.answer.Load())
			// Closed for writing, the client reads EOF after the answer;
			// the connection stays open for reading, so that a request
			// sent on it meanwhile is read (and gets no answer), not
			// refused with a reset that could cut the answer short.
			c.CloseWrite()
			io.Copy(io.Discard, c)
			return
		case "/keep":
			if _, err := c.Write(*s.answer.Load()); err != nil {
				return
			}
		default:
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	}
}

// send sends one request through rt and reads the whole answer. A call that
// takes seconds has hung (the server always ends its answer): it fails the
// test with every goroutine's stack, before the fuzzing engine's own bound
// (10s an input) kills the process with no word of where.
func (s *fuzzServer) send(t *testing.T, rt http.RoundTripper, method, path, body string) fuzzResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	u := *s.url
	u.Path = path
	req, err := newRequest(ctx, method, &u, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if ctx.Err() != nil {
		t.Fatalf("%s %s: hung (%v)\n%s", method, path, err, stacks())
	}
	if err != nil {
		return fuzzResult{Failed: true, Err: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if ctx.Err() != nil {
		t.Fatalf("%s %s: reading the body hung (%v)\n%s", method, path, err, stacks())
	}
	r := fuzzResult{
		Status: resp.Status, StatusCode: resp.StatusCode, Proto: resp.Proto, Header: resp.Header,
		ContentLength: resp.ContentLength, TransferEncoding: resp.TransferEncoding, Close: resp.Close,
		Body: string(b), Trailer: resp.Trailer,
	}
	if err != nil {
		r.ReadErr = err.Error()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			r.ReadErr = io.ErrUnexpectedEOF.Error() // however it is wrapped
		}
	}
	return r
}

func stacks() []byte {
	buf := make([]byte, 1<<20)
	return buf[:runtime.Stack(buf, true)]
}

// fuzzSeeds are answers worth starting from: the framings an answer can
// have, and the ways each can be wrong.
var fuzzSeeds = []struct {
	method uint8 // see fuzzMethod: 0 GET, 1 HEAD, 2 POST
	answer string
}{
	// Framing.
	{0, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\r\n\r\nclose-delimited"},
	{0, "HTTP/1.0 200 OK\r\n\r\nclose-delimited"},
	{0, "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"},
	{2, "HTTP/1.1 201 Created\r\nLocation: /x/1\r\nContent-Length: 0\r\n\r\n"},
	{2, "HTTP/1.1 204 No Content\r\n\r\n"},
	{0, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello"},
	{0, "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"},
	{1, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"},
	{1, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"},
	{1, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
	// Informational answers.
	{2, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nframes"},
	{0, "HTTP/1.1 101 Switching Protocols\r\n\r\n"},
	{0, "HTTP/1.1 100 Continue\r\n\r\n"},
	{2, "HTTP/0.0 100 \r\n0:\r\n\r\nHTTP/0.0 100 \r\n\r\nHTTP/0.0B200 \r\nh:\r\n\r\n"}, // being minimized when a fuzzing process died (it passes)
	{0, "HTTP/1.1 199 Whatever\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	// Lengths that do not match.
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsmugg"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
	// Chunks that are wrong.
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\nhello"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{0, "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\nContent-Length: 9\r\n\r\n"},
	// Status lines and headers that are wrong.
	{0, ""},
	{0, "HTTP/1.1 200 OK\r\n"},
	{0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"},
	{0, "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 2000 OK\r\n\r\n"},
	{0, "HTTP/1.1 099 Low\r\n\r\n"},
	{0, "HTTX/1.1 200 OK\r\n\r\n"},
	{0, "HTTP/2.0 200 OK\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"},
	{0, "\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nX-A : a\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nX A: a\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok"},
	{0, "HTTP/1.1 200 OK\r\nno colon\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\ncontent-length: 2\r\n\r\nok"},
	{0, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
	{0, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nok"},
}
