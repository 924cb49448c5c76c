// Package federation is mcpgate's client side to upstream MCP servers: the
// servers a gateway fronts beside its REST APIs and playbook engines. This
// file resolves where such a server is; the rest of the package connects to
// it.
package federation

import (
	"errors"
	"fmt"
	"strings"
)

// EnvSlug is a server slug's part of an environment variable's name:
// upper-cased, every character that is not an ASCII letter or digit
// replaced by "_" ("kubernetes" → "KUBERNETES", "my-fs.v2" → "MY_FS_V2"; one "_" a character).
// It is NoETL's rule, so a NoETL deployment's environment works unchanged.
func EnvSlug(slug string) string {
	var b strings.Builder
	b.Grow(len(slug))
	for _, c := range slug { // one "_" a character, not a byte
		switch {
		case 'a' <= c && c <= 'z':
			b.WriteRune(c - 'a' + 'A')
		case 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// EndpointVars are the environment variables that name a server's
// endpoint, in the order they are read: mcpgate's, then NoETL's.
func EndpointVars(slug string) []string {
	s := EnvSlug(slug)
	return []string{"MCPGATE_MCP_" + s + "_ENDPOINT", "NOETL_MCP_" + s + "_ENDPOINT"}
}

// ServerEndpoint resolves a server slug to its endpoint URL from the
// environment (getenv, usually os.Getenv): the first of [EndpointVars]
// that is set and not blank, with surrounding space and trailing "/"
// removed. An error names the variables read.
func ServerEndpoint(slug string, getenv func(string) string) (string, error) {
	if strings.TrimSpace(slug) == "" {
		return "", errors.New("server: the slug is empty")
	}
	vars := EndpointVars(slug)
	for _, v := range vars {
		if e := strings.TrimRight(strings.TrimSpace(getenv(v)), "/"); e != "" {
			return e, nil
		}
	}
	return "", fmt.Errorf("server %q: no endpoint: set %s (or %s)", slug, vars[0], vars[1])
}
