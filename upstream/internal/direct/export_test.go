package direct

// NetHTTPForTest is netHTTP, for TestNetHTTPIsUpstreams: that test is in
// package direct_test, which can import upstream.
var NetHTTPForTest = netHTTP
