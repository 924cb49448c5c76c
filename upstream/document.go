package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/yaml"
)

// MaxDocumentBytes bounds how much of an OpenAPI document is read. The largest real
// documents we know of (GitHub, Stripe, Kubernetes) are about 4 MB.
const MaxDocumentBytes = 64 << 20

// Document is a loaded OpenAPI description of an upstream API.
type Document struct {
	// T is the document, converted to OpenAPI 3 when the source was Swagger 2.0.
	T *openapi3.T
	// Source is where the document was read from, as given.
	Source string
	// URL is the absolute location of the document when it was fetched over
	// HTTP(S); relative server URLs resolve against it. Nil for files and data.
	URL *url.URL
	// Version is the source's declared version: "2.0", "3.0.x" or "3.1.x".
	Version string
	// Warnings lists what relaxed validation (Validate) still found wrong.
	// Real documents (GitHub's, FastAPI's) fail strict validation and still
	// work, so these do not stop loading. With LoadOptions.IncludeOrigin, it
	// also says why the document's lines are unknown, if they are.
	Warnings []string
	// Strings, with LoadOptions.IncludeOrigin, is every string of the
	// source with its lines (nil otherwise).
	Strings *Strings
}

// LoadOptions configures [LoadDocument]. The zero value is ready to use.
type LoadOptions struct {
	// Client fetches http(s) sources. Nil means a client with a 30s timeout.
	// Whatever the client's own CheckRedirect, only same-origin redirects
	// are followed (see LoadDocument).
	Client *http.Client
	// IncludeOrigin records where each element stands in the source (see
	// openapi3.Origin), for reports that point at lines. OpenAPI 3 only;
	// it costs time and memory, so only the audit asks for it.
	IncludeOrigin bool
}

// LoadDocument reads an OpenAPI 3.0/3.1 or Swagger 2.0 document, in JSON or YAML,
// from a file path or an http(s) URL.
//
// External $refs (to other files or URLs) are never followed: a document from an
// untrusted source must not make the gateway read local files or reach internal
// hosts (SSRF).
//
// For the same reason a URL's redirects are followed only within its origin
// (scheme, host and port, as RFC 6454 compares them): a server that answers
// for the document must not be able to send the gateway to another host —
// a cloud metadata address, an internal service — nor downgrade https to
// http. A redirect elsewhere is an error naming both URLs; give the final URL
// instead. Relative server URLs resolve against the URL the document was
// read from, after redirects.
func LoadDocument(ctx context.Context, src string, opts *LoadOptions) (*Document, error) {
	var o LoadOptions
	if opts != nil {
		o = *opts
	}
	var (
		data []byte
		loc  *url.URL
		err  error
	)
	if u, perr := url.Parse(src); perr == nil && (u.Scheme == "http" || u.Scheme == "https") {
		data, loc, err = fetch(ctx, o.Client, u)
	} else {
		data, err = readFile(src)
	}
	if err != nil {
		return nil, err
	}
	doc, err := parseDocument(ctx, data, o.IncludeOrigin)
	if err != nil {
		return nil, err
	}
	doc.Source = src
	doc.URL = loc
	return doc, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f)
}

var errTooLarge = fmt.Errorf("document is larger than %d MiB", MaxDocumentBytes>>20)

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDocumentBytes {
		return nil, errTooLarge
	}
	return data, nil
}

// fetch GETs u and returns the document's bytes and the URL they were read
// from, after same-origin redirects.
func fetch(ctx context.Context, c *http.Client, u *url.URL) ([]byte, *url.URL, error) {
	var client http.Client
	if c != nil {
		client = *c // a copy: the caller's client keeps its own policy
	} else {
		client.Timeout = 30 * time.Second
	}
	client.CheckRedirect = sameOriginRedirects(client.CheckRedirect)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		var re *redirectError
		if errors.As(err, &re) {
			return nil, nil, re // its text names both URLs; url.Error's would name one twice
		}
		return nil, nil, &unavailableError{err}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("HTTP %s", resp.Status)
		switch {
		case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout:
			return nil, nil, &unavailableError{err}
		}
		return nil, nil, err
	}
	data, err := readLimited(resp.Body)
	if err != nil && !errors.Is(err, errTooLarge) {
		err = &unavailableError{err} // the connection broke mid-body
	}
	return data, resp.Request.URL, err
}

// unavailableError is a document fetch that failed in a way a retry may
// mend: no connection, a timeout, a connection broken mid-body, or an
// answer of 5xx, 429 or 408.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// Unavailable reports whether err is a document fetch that failed in a way
// that a later retry may mend: the server could not be reached, timed out,
// broke the connection, or answered 5xx, 429 or 408. Anything else — a 404,
// a redirect to another origin, a document that does not parse, a file that
// does not exist — is a mistake in the configuration or the document, which
// a retry will not mend.
func Unavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

// redirectError is a redirect fetch refused: it leaves the origin of the
// URL it came from.
type redirectError struct {
	from, to *url.URL
}

func (e *redirectError) Error() string {
	return fmt.Sprintf("redirected from %s to %s, another origin: only redirects within the document URL's scheme, host and port are followed (give the final URL instead)", e.from.Redacted(), e.to.Redacted())
}

// sameOriginRedirects returns a CheckRedirect policy that refuses a
// redirect to another origin than the first request's, then applies next
// (net/http's default, at most 10 redirects, when nil).
func sameOriginRedirects(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if origin(req.URL) != origin(via[0].URL) {
			return &redirectError{from: via[len(via)-1].URL, to: req.URL}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// origin is u's scheme, host and port, as RFC 6454 §4 compares them:
// the scheme and host without case, the scheme's default port explicit.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// ParseDocument parses document bytes (JSON or YAML; OpenAPI 3.x or Swagger
// 2.0). It does not validate: see [Document.Validate].
func ParseDocument(ctx context.Context, data []byte) (*Document, error) {
	return parseDocument(ctx, data, false)
}

func parseDocument(ctx context.Context, data []byte, includeOrigin bool) (*Document, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	t := bytes.TrimSpace(data)
	switch {
	case len(t) == 0:
		return nil, errors.New("document is empty")
	case !utf8.Valid(t) || bytes.IndexByte(t, 0) >= 0:
		return nil, errors.New("not a JSON or YAML document (binary data)")
	case t[0] == '<':
		// An HTML page — an API's documentation rather than its document —
		// parses as one YAML string; say what it is instead.
		return nil, errors.New("not a JSON or YAML document (it looks like an HTML page)")
	}
	jsonData := data
	if t[0] != '{' {
		var err error
		if jsonData, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("not valid YAML: %v", DecodeError(data, err))
		}
	}
	var head struct {
		Swagger any `json:"swagger"`
		OpenAPI any `json:"openapi"`
	}
	if err := json.Unmarshal(jsonData, &head); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			// "hello", [1, 2]: valid JSON or YAML, but not a document.
			return nil, fmt.Errorf("not an OpenAPI document: %v", DecodeError(jsonData, err))
		}
		return nil, DecodeError(jsonData, err)
	}
	var (
		doc      *openapi3.T
		version  string
		err      error
		warnings []string
	)
	switch {
	case head.OpenAPI != nil:
		version = fmt.Sprint(head.OpenAPI)
		if !strings.HasPrefix(version, "3.") {
			return nil, fmt.Errorf("unsupported openapi version %q (want 3.0 or 3.1, or swagger 2.0)", version)
		}
		src, rewritten := jsonData, false
		if strings.HasPrefix(version, "3.1") {
			if src, rewritten, err = resolveIDRefs(jsonData); err != nil {
				return nil, fmt.Errorf("not valid JSON: %v", err)
			}
		}
		if includeOrigin && !rewritten {
			// Lines must be the source's, not those of its JSON form.
			if doc, err = loadWithOrigins(ctx, data, t[0] == '{'); err != nil {
				// The lines are only for reports: load the document as
				// tools and serve do, and say why its lines are unknown.
				warnings = append(warnings, "line numbers unavailable: "+oneLine(err).Error())
				doc = nil
			}
		}
		if doc == nil {
			doc, err = loadV3(newLoader(ctx), src)
		}
	case head.Swagger != nil:
		version = fmt.Sprint(head.Swagger)
		if version != "2.0" {
			return nil, fmt.Errorf("unsupported swagger version %q (want 2.0)", version)
		}
		doc, err = loadV2(newLoader(ctx), jsonData)
	default:
		return nil, errors.New(`neither an "openapi" nor a "swagger" version field: not an OpenAPI document`)
	}
	if err != nil {
		return nil, err
	}
	if doc.Paths == nil {
		doc.Paths = openapi3.NewPaths()
	}
	d := &Document{T: doc, Version: version, Warnings: warnings}
	if includeOrigin {
		// Errors leave Strings nil: the audit then names the operation's
		// line instead of each text's.
		d.Strings, _ = sourceStrings(data, t[0] == '{')
	}
	return d, nil
}

// newLoader is a kin-openapi loader that never follows external $refs (see
// LoadDocument).
func newLoader(ctx context.Context) *openapi3.Loader {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = false // explicit: see LoadDocument
	return loader
}

// loadWithOrigins loads an OpenAPI 3 document recording where each element
// stands in data (openapi3.Origin). kin-openapi tracks origins only on its
// YAML path, which it takes when the input is not JSON; JSON is YAML once
// yamlForm has rewritten what YAML reads differently (see lines.go), and a
// trailing YAML comment makes the JSON parse fail and leaves every line
// where it was, so JSON documents get lines too.
func loadWithOrigins(ctx context.Context, data []byte, isJSON bool) (*openapi3.T, error) {
	src := data
	if isJSON {
		y, err := yamlForm(data)
		if err != nil {
			return nil, err
		}
		src = append(y, "\n# mcpgate: read as YAML for line numbers\n"...)
	}
	loader := newLoader(ctx)
	loader.IncludeOrigin = true
	return loadV3(loader, src)
}

// Validate checks the document with relaxed options (examples, defaults and
// patterns off) and records what it still finds as Warnings: real documents
// (GitHub's, FastAPI's) fail strict validation and still work. It only reads
// the document, so it may run while tools are built from it.
func (d *Document) Validate(ctx context.Context) {
	vctx := openapi3.WithValidationOptions(ctx,
		openapi3.DisableExamplesValidation(),
		openapi3.DisableSchemaDefaultsValidation(),
		openapi3.DisableSchemaPatternValidation(),
		openapi3.EnableMultiError(),
	)
	if err := validate(vctx, d.T); err != nil {
		d.Warnings = append(d.Warnings, splitWarnings(err)...)
	}
}

// validate runs kin-openapi's validation, turning a panic inside it into an
// error: validation walks user-supplied structures and must not take the
// process down.
func validate(ctx context.Context, doc *openapi3.T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("validation aborted: %v", r)
		}
	}()
	return doc.Validate(ctx)
}

func loadV3(loader *openapi3.Loader, data []byte) (doc *openapi3.T, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("cannot load document: %v", r)
		}
	}()
	doc, err = loader.LoadFromData(data)
	if err != nil {
		return nil, DecodeError(data, err)
	}
	return doc, nil
}

func loadV2(loader *openapi3.Loader, data []byte) (doc *openapi3.T, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("cannot convert swagger 2.0 document: %v", r)
		}
	}()
	var doc2 openapi2.T
	if err := json.Unmarshal(data, &doc2); err != nil {
		raw, msg := err.Error(), DecodeError(data, err).Error()
		if strings.Contains(raw, "cannot unmarshal array into") && strings.Contains(raw, "Schema") {
			// Slack's document does this: "items": [ ... ].
			msg += ` (e.g. "items": [...], the draft-4 tuple form, which Swagger 2.0 does not allow)`
		}
		return nil, fmt.Errorf("invalid swagger 2.0 document: %s", msg)
	}
	doc, err = openapi2conv.ToV3WithLoader(&doc2, loader, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot convert swagger 2.0 document: %v", oneLine(err))
	}
	return doc, nil
}

// splitWarnings flattens kin-openapi's multi-error into one line per problem.
func splitWarnings(err error) []string {
	var me openapi3.MultiError
	if errors.As(err, &me) {
		out := make([]string, 0, len(me))
		for _, e := range me {
			out = append(out, oneLine(e).Error())
		}
		return out
	}
	return []string{oneLine(err).Error()}
}

// oneLine folds a multi-line error message onto one line, so the CLI can report
// every load failure as a single line.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.ContainsAny(msg, "\r\n") {
		return err
	}
	fields := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	for i, f := range fields {
		fields[i] = strings.TrimSpace(f)
	}
	return errors.New(strings.Join(fields, "; "))
}

// ServerURL returns the document's first server URL, with variables replaced by
// their defaults and resolved against the document's own URL when relative. It
// returns nil when the document names no usable server.
func (d *Document) ServerURL() *url.URL {
	var raw string
	if len(d.T.Servers) > 0 && d.T.Servers[0] != nil {
		s := d.T.Servers[0]
		raw = s.URL
		for name, v := range s.Variables {
			if v != nil {
				raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
			}
		}
	}
	if raw == "" {
		raw = "/" // OpenAPI: with no servers, the default server URL is "/".
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	if !u.IsAbs() {
		if d.URL == nil {
			return nil
		}
		u = d.URL.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil
	}
	return u
}
