package api

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// maxRecorded is how many requests /_debug/requests keeps.
const maxRecorded = 100

// maxRecordedBody is how much of a request body is recorded; the handler
// still reads the whole body.
const maxRecordedBody = 1 << 20

// RecordedRequest is one request as GET /_debug/requests lists it (see
// [Options].RecordRequests).
type RecordedRequest struct {
	Method string `json:"method"`
	// Path is the escaped path, as the client sent it.
	Path     string `json:"path"`
	RawQuery string `json:"raw_query"`
	// Headers holds every header under its canonical name, Authorization
	// verbatim. Host is not a header in Go's server: see [http.Request].Host.
	Headers map[string][]string `json:"headers"`
	// Body is the request body (its first MiB), or "".
	Body string `json:"body"`
}

// recorder keeps the last maxRecorded requests. It has its own lock so that
// recording never waits for the store.
type recorder struct {
	mu   sync.Mutex
	reqs []RecordedRequest // oldest first
}

func (rec *recorder) add(r RecordedRequest) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == maxRecorded {
		// Shift rather than reslice, so the backing array stays bounded.
		copy(rec.reqs, rec.reqs[1:])
		rec.reqs = rec.reqs[:maxRecorded-1]
	}
	rec.reqs = append(rec.reqs, r)
}

func (rec *recorder) list() []RecordedRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]RecordedRequest{}, rec.reqs...)
}

func (rec *recorder) clear() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.reqs = nil
}

// observe logs every /api/ request and, if enabled, records it.
func (a *API) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAPI(r) {
			next.ServeHTTP(w, r)
			return
		}
		a.logger.Debug("request", "method", r.Method, "path", r.URL.Path)
		if a.opts.RecordRequests {
			body, _ := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody))
			// Give the handler the body it would have read: the recorded
			// prefix, then whatever is left.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			a.recorder.add(RecordedRequest{
				Method:   r.Method,
				Path:     r.URL.EscapedPath(),
				RawQuery: r.URL.RawQuery,
				Headers:  r.Header.Clone(),
				Body:     string(body),
			})
		}
		next.ServeHTTP(w, r)
	})
}

func (a *API) listRecorded(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.recorder.list())
}

func (a *API) clearRecorded(w http.ResponseWriter, _ *http.Request) {
	a.recorder.clear()
	w.WriteHeader(http.StatusNoContent)
}
