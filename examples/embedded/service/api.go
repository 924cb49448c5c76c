package service

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"
)

// newAPI lists every route of the REST API. Each /api/ route is wrapped in
// requireToken one by one — the way a FastAPI route declares its auth
// dependency in orchestrator-core — so a route cannot be added without
// deciding on its auth. The document is open: it is what the gateway reads at
// start-up, before any caller (and any caller's token) exists.
func (s *Service) newAPI() http.Handler {
	r := newRouter()
	r.HandleFunc("/openapi.json", serveOpenAPI).Methods(http.MethodGet)

	r.Handle("/api/notes", s.requireToken(s.listNotes)).Methods(http.MethodGet)
	r.Handle("/api/notes", s.requireToken(s.createNote)).Methods(http.MethodPost)
	r.Handle("/api/notes/{note_id}", s.requireToken(s.getNote)).Methods(http.MethodGet)
	r.Handle("/api/notes/{note_id}", s.requireToken(s.deleteNote)).Methods(http.MethodDelete)
	return s.logRequests(r)
}

// newRouter returns a router that answers unknown paths and methods in the
// API's own JSON error shape, and matches on the escaped path, so that an id
// such as "..%2Fadmin" stays one segment (a missing note), not a path to clean.
func newRouter() *mux.Router {
	r := mux.NewRouter()
	r.UseEncodedPath()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, detail{"not found"})
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, detail{"method not allowed"})
	})
	return r
}

// logRequests logs one debug record per API request: method and path, never
// headers (they carry the token).
func (s *Service) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.logger.Enabled(r.Context(), slog.LevelDebug) {
			s.logger.LogAttrs(r.Context(), slog.LevelDebug, "api request",
				slog.String("method", r.Method), slog.String("path", r.URL.Path))
		}
		next.ServeHTTP(w, r)
	})
}

// detail is the body of every error answer, as FastAPI (and so
// orchestrator-core) writes it: {"detail": "..."}.
type detail struct {
	Detail string `json:"detail"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"detail":"cannot encode the answer"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
