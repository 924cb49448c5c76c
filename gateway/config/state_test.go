package config

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestStateConfig: the state section from YAML — memory by default, redis
// with its URL from the file or MCPGATE_REDIS_URL — and every bad value a
// start-up error naming its key, without echoing a password.
func TestStateConfig(t *testing.T) {
	const ups = "upstreams:\n  - openapi: a.json\n    base_url: http://127.0.0.1:1\n"
	for _, tt := range []struct {
		name, yaml, env string
		want            StateConfig
		err             string
	}{
		{name: "default", yaml: "", want: StateConfig{Backend: "memory"}},
		{name: "redis from the file", yaml: "state:\n  backend: redis\n  redis: {url: \"redis://10.0.0.1:6379/2\", key_prefix: \"a:\"}\ntasks: {key_env: K}\n",
			want: StateConfig{Backend: "redis", Redis: RedisConfig{URL: "redis://10.0.0.1:6379/2", KeyPrefix: "a:", Timeout: DefaultStateTimeout}}},
		{name: "redis from the environment", yaml: "state: {backend: redis}\ntasks: {key_env: K}\n", env: "rediss://:pw@r.example:6380",
			want: StateConfig{Backend: "redis", Redis: RedisConfig{URL: "rediss://:pw@r.example:6380", KeyPrefix: DefaultStateKeyPrefix, Timeout: DefaultStateTimeout}}},
		{name: "unix socket", yaml: "state: {backend: redis, redis: {url: \"unix:///run/redis.sock\", timeout: 1s}}\ntasks: {key_env: K}\n",
			want: StateConfig{Backend: "redis", Redis: RedisConfig{URL: "unix:///run/redis.sock", KeyPrefix: DefaultStateKeyPrefix, Timeout: time.Second}}},
		{name: "redis without a task key", yaml: "state: {backend: redis, redis: {url: \"redis://h:1\"}}\n", err: "tasks.key_env: required with state.backend redis"},
		{name: "unknown backend", yaml: "state: {backend: etcd}\n", err: `state.backend: "etcd" is not memory or redis`},
		{name: "no url", yaml: "state: {backend: redis}\n", err: "state.redis.url: required with backend redis (or set MCPGATE_REDIS_URL)"},
		{name: "wrong scheme", yaml: "state: {backend: redis, redis: {url: \"http://u:secret@h:1\"}}\n", err: "state.redis.url: http://u:xxxxx@h:1: the scheme must be redis, rediss or unix"},
		{name: "no host", yaml: "state: {backend: redis, redis: {url: \"redis:///0\"}}\n", err: "state.redis.url: redis:///0 has no host"},
		{name: "bad db", yaml: "state: {backend: redis, redis: {url: \"redis://h:1/x\"}}\n", err: `the path must be a database number, not "x"`},
		{name: "not a URL", yaml: "state: {backend: redis, redis: {url: \"redis://:secret@h:port\"}}\n", err: "state.redis.url: not a URL"},
		{name: "redis without backend", yaml: "state: {redis: {url: \"redis://h:1\"}}\n", err: "state.redis: set, but state.backend is memory"},
		{name: "timeout over the ceiling", yaml: "state: {backend: redis, redis: {url: \"redis://h:1\", timeout: 1m}}\n", err: "state.redis.timeout: 1m0s is above the ceiling of 5s"},
		{name: "negative timeout", yaml: "state: {backend: redis, redis: {url: \"redis://h:1\", timeout: -1s}}\n", err: "state.redis.timeout: -1s must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(RedisURLEnv, tt.env)
			cfg, err := Parse([]byte(tt.yaml + ups))
			if err != nil {
				t.Fatal(err)
			}
			r, err := cfg.Resolve()
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the password: %v", err)
				}
			case err != nil:
				t.Fatal(err)
			case r.State != tt.want:
				t.Errorf("state %+v, want %+v", r.State, tt.want)
			}
		})
	}
}

// FuzzRedisURL: any state.redis.url is accepted or refused with an error
// naming state.redis.url, never a panic, and a refusal never shows the
// URL's password.
func FuzzRedisURL(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "rediss://:pw@h:1", "unix:///s.sock", "redis://h:1/x", "http://u:pw@h", "redis://:pw@h:port", "%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c := StateConfig{Backend: "redis", Redis: RedisConfig{URL: raw}}
		t.Setenv(RedisURLEnv, "")
		err := c.validate()
		if raw == "" {
			if err == nil {
				t.Fatal("an empty url was accepted")
			}
			return
		}
		if err == nil {
			return
		}
		if !strings.HasPrefix(err.Error(), "state.redis.url: ") {
			t.Fatalf("error %q does not name state.redis.url", err)
		}
		// The message must not depend on the password: the same URL with
		// another password is refused in the same words. (Looking for the
		// password in the message would also find it where it equals the
		// user name or the host, which are shown.)
		if u, perr := url.Parse(raw); perr == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				if other, ok := withPassword(raw, "Qx7wOtherPassword"); ok {
					c.Redis.URL = other
					if err2 := c.validate(); err2 == nil || err2.Error() != err.Error() {
						t.Fatalf("error %q, and with another password %v: the message depends on the password", err, err2)
					}
				}
			}
		}
	})
}

// withPassword returns raw with the password of its authority's user
// information replaced by pw, as url.Parse finds them.
func withPassword(raw, pw string) (string, bool) {
	i := strings.Index(raw, "//")
	if i < 0 {
		return "", false
	}
	rest := raw[i+2:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return "", false
	}
	colon := strings.Index(rest[:at], ":")
	if colon < 0 {
		return "", false
	}
	return raw[:i+2] + rest[:colon+1] + pw + rest[at:], true
}
