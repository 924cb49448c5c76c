package federation

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// URLVars are the environment variables that name the MCP endpoint to use
// when neither a URL nor a server with an endpoint of its own is given, in
// the order they are read: mcpgate's, then NoETL's.
var URLVars = []string{"MCPGATE_MCP_URL", "NOETL_MCP_URL"}

// TimeoutVars are the environment variables that bound one MCP request, in
// seconds (a decimal number: "30", "2.5"), in the order they are read.
var TimeoutVars = []string{"MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS", "NOETL_MCP_REQUEST_TIMEOUT_SECONDS"}

// DefaultRequestTimeout bounds one MCP request when neither the caller nor
// the environment ([TimeoutVars]) says otherwise: NoETL's default.
const DefaultRequestTimeout = 60 * time.Second

// Endpoint resolves an MCP endpoint from the environment (getenv, usually
// os.Getenv) as NoETL's mcp tool does when its step names no URL: with a
// slug, the server's own variables ([ServerEndpoint]) first; then
// [URLVars]. The first that is set and not blank wins, with surrounding
// space and trailing "/" removed; from reports which variable it was. An
// error names every variable read.
func Endpoint(slug string, getenv func(string) string) (endpoint, from string, err error) {
	var vars []string
	if strings.TrimSpace(slug) != "" {
		vars = EndpointVars(slug)
	}
	vars = append(vars, URLVars...)
	for _, v := range vars {
		if e := strings.TrimRight(strings.TrimSpace(getenv(v)), "/"); e != "" {
			return e, v, nil
		}
	}
	if strings.TrimSpace(slug) != "" {
		return "", "", fmt.Errorf("server %q: no endpoint: set %s", slug, orList(vars))
	}
	return "", "", fmt.Errorf("no endpoint: set %s", orList(vars))
}

// RequestTimeout reads the request timeout from the environment (getenv,
// usually os.Getenv): the first of [TimeoutVars] that is set and not blank.
// ok is false when none is. A value that is not a positive, finite number
// of seconds is an error naming the variable, not a silent default: a
// deployment that sets it means it.
func RequestTimeout(getenv func(string) string) (d time.Duration, ok bool, err error) {
	for _, v := range TimeoutVars {
		s := strings.TrimSpace(getenv(v))
		if s == "" {
			continue
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > math.MaxInt64/float64(time.Second) {
			return 0, false, fmt.Errorf("%s: %q is not a positive number of seconds", v, s)
		}
		return time.Duration(f * float64(time.Second)), true, nil
	}
	return 0, false, nil
}

// orList renders ["A" "B" "C"] as "A, B or C".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
