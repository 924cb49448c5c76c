// Package service is a small Go service that serves a REST API of its own — a
// notes resource — and mounts the mcpgate gateway beside it, in one process:
// the pattern of orchestrator-core, whose MCP sub-app calls the service's
// routes in-process.
//
// The gateway reads the API's OpenAPI document (GET /openapi.json, served by
// the API itself), exposes the operations tagged agent-exposed as MCP tools at
// /mcp, and serves each tool call with the API's own http.Handler: no network
// hop, no second port. The call carries the MCP caller's bearer token and no
// other inbound header, and the API checks that token itself, exactly as it
// checks a direct REST call; so the gateway adds no way around the API's auth,
// and a refused token comes back to the model as the API's own 401, in an
// isError tool result.
//
// The files follow the request: service.go composes the two (see
// [Service.mountGateway]), api.go routes the REST API, auth.go is its token
// check, notes.go its in-memory store and handlers, openapi.go its document.
package service

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/mcpgate/mcpgate/gateway"
)

// Options configures a [Service]. Token is required.
type Options struct {
	// Token is the bearer token every /api/ route requires, whether the
	// request comes straight from a REST client or from an MCP tool call
	// through /mcp. No default: New refuses to start without one, because a
	// service that forwards its callers' tokens to its own routes has
	// nothing to forward to if the routes check none.
	Token string
	// Logger receives the gateway's logs and one debug record per API request
	// (method and path only). Nil: no logging. Tokens are never logged.
	Logger *slog.Logger
}

// Service is the notes API and the MCP gateway mounted beside it. It is safe
// for concurrent use.
type Service struct {
	opts    Options
	logger  *slog.Logger
	notes   *notes
	api     http.Handler // the REST API: what /api/ requests and tool calls both reach
	handler http.Handler // every route: the API, and the gateway at /mcp
}

// New builds the service: the API, then the gateway, which reads the API's
// document through the API's own handler, so ctx bounds that read. opts is
// copied; nil is an error, since Options.Token is required.
func New(ctx context.Context, opts *Options) (*Service, error) {
	return newService(ctx, opts, nil)
}

// newService is New with a test seam: observe, if not nil, sees every request
// the API handler receives — from a REST client or in-process from the
// gateway — before the token check, so a test can say what reached the API.
func newService(ctx context.Context, opts *Options, observe func(*http.Request)) (*Service, error) {
	s := &Service{notes: newNotes()}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Token == "" {
		return nil, errors.New("service: a token is required (Options.Token): every /api/ route checks it")
	}
	s.logger = s.opts.Logger
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.api = s.newAPI()
	if observe != nil {
		api := s.api
		s.api = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			observe(r)
			api.ServeHTTP(w, r)
		})
	}
	// Match on the escaped path here too, or the router would clean an id
	// of "..%2F..%2Fopenapi.json" into another route and redirect to it.
	r := mux.NewRouter().UseEncodedPath()
	if err := s.mountGateway(ctx, r); err != nil {
		return nil, err
	}
	// Everything that is not /mcp is the API's (it answers unknown paths
	// with its own JSON 404).
	r.PathPrefix("/").Handler(s.api)
	s.handler = r
	return s, nil
}

// mountGateway builds the MCP gateway over the service's own API and mounts
// it on r at /mcp. The upstream has a Handler, so the gateway fetches
// "/openapi.json" from it and serves every tool call with it, in this process.
// docs/embedding.md quotes these lines verbatim; a test keeps the two alike.
func (s *Service) mountGateway(ctx context.Context, r *mux.Router) error {
	g, err := gateway.New(ctx, &gateway.Config{Upstreams: []gateway.Upstream{
		{Name: "notes", OpenAPI: "/openapi.json", Handler: s.api},
	}}, &gateway.Options{Logger: s.logger})
	if err != nil {
		return err
	}
	r.Handle("/mcp", g.Handler())
	return nil
}

// Handler returns the service's routes: GET /openapi.json, the /api/notes
// routes, and the MCP endpoint at /mcp (Streamable HTTP, stateless).
func (s *Service) Handler() http.Handler { return s.handler }
