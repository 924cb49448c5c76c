package upstream

import (
	"context"
	"maps"
	"slices"
	"testing"
)

const reviewPathsDoc = `openapi: 3.0.3
info: {title: review, version: "1"}
paths:
  /items/{id}:
    get:
      operationId: getItem
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /aliases:
    get:
      operationId: aliases
      parameters:
        - {name: X-Request-Tag, in: header, schema: {type: string}}
        - {name: X_Forwarded_For, in: header, schema: {type: string}}
        - {name: X-Forwarded_Host, in: header, schema: {type: string}}
        - {name: X_Real_IP, in: header, schema: {type: string}}
        - {name: Proxy_Authorization, in: header, schema: {type: string}}
        - {name: X-Forwarded, in: header, schema: {type: string}}
        - {name: X-Original-Forwarded-For, in: header, schema: {type: string}}
        - {name: CF-Connecting-IP, in: header, schema: {type: string}}
        - {name: Fastly-Client-IP, in: header, schema: {type: string}}
        - {name: X-Cluster-Client-IP, in: header, schema: {type: string}}
        - {name: X-Auth-Request-User, in: header, schema: {type: string}}
        - {name: Remote-User, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
`

// TestForbiddenHeaderAliases: forbiddenHeader matches canonical names
// exactly ("X-Forwarded-" prefix, a fixed list). Many servers fold '_' and
// '-' into one (CGI/WSGI/Rack/PHP map both X_Forwarded_For and
// X-Forwarded-For to HTTP_X_FORWARDED_FOR), and proxies other than nginx name
// the client's address and identity differently (CF-Connecting-IP,
// Fastly-Client-IP, X-Cluster-Client-IP, oauth2-proxy's X-Auth-Request-User,
// Authelia's Remote-User). A document that declares them hands a model the
// headers issue 7 says it must never set.
func TestForbiddenHeaderAliases(t *testing.T) {
	doc, err := ParseDocument(context.Background(), []byte(reviewPathsDoc))
	if err != nil {
		t.Fatal(err)
	}
	b := bindOp(t, doc.T, "aliases")
	props := b.InputSchema["properties"].(map[string]any)
	if got := slices.Sorted(maps.Keys(props)); !slices.Equal(got, []string{"X-Request-Tag"}) {
		t.Errorf("arguments %v, want only X-Request-Tag: the others alias X-Forwarded-*, Proxy-Authorization or a proxy's client address / identity header", got)
	}
}
