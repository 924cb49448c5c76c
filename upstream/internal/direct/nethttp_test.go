package direct_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/internal/direct"
)

// TestNetHTTPIsUpstreams: the net/http transport that this package's
// differential tests and benchmark compare with is upstream.NewTransport,
// the one a Client uses where it does not use the direct one.
func TestNetHTTPIsUpstreams(t *testing.T) {
	got, want := direct.NetHTTPForTest(), upstream.NewTransport()
	// Functions cannot be compared, but for nil: the proxy is checked to
	// be the same function, and the dialer's settings are left to the
	// eye (they do not bear on how an answer is read).
	if reflect.ValueOf(got.Proxy).Pointer() != reflect.ValueOf(http.ProxyFromEnvironment).Pointer() ||
		reflect.ValueOf(want.Proxy).Pointer() != reflect.ValueOf(http.ProxyFromEnvironment).Pointer() {
		t.Error("Proxy: not http.ProxyFromEnvironment in both")
	}
	if (got.DialContext == nil) != (want.DialContext == nil) {
		t.Error("DialContext: set in one only")
	}
	got.Proxy, want.Proxy, got.DialContext, want.DialContext = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("netHTTP is not upstream.NewTransport:\n%+v\nwant\n%+v", got, want)
	}
}
