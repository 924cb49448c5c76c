package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// RedisURLEnv is the environment variable read for state.redis.url when the
// file does not set it (a URL may hold a password: keep it in a Secret).
const RedisURLEnv = "MCPGATE_REDIS_URL"

// Shared-state defaults (see the gateway/state package and docs/state.md).
const (
	DefaultStateKeyPrefix = "mcpgate:"
	DefaultStateTimeout   = 250 * time.Millisecond
	// MaxStateTimeout bounds state.redis.timeout: a shared-state operation
	// is on a playbook call's path, and an outage must not hold calls.
	MaxStateTimeout = 5 * time.Second
)

// StateConfig says where the replicas of a fleet share state (see
// docs/state.md):
//
//	state:
//	  backend: redis            # or memory (the default)
//	  redis: {url: redis://127.0.0.1:6379/0, key_prefix: "mcpgate:", timeout: 250ms}
type StateConfig struct {
	// Backend is "memory" (one process: the default) or "redis" (a fleet).
	Backend string `yaml:"backend"`
	// Redis configures the redis backend.
	Redis RedisConfig `yaml:"redis"`
}

// RedisConfig is state.redis.
type RedisConfig struct {
	// URL is redis://[user:password@]host:port/db, rediss:// (TLS) or
	// unix:///path. Default: the environment variable MCPGATE_REDIS_URL.
	URL string `yaml:"url"`
	// KeyPrefix starts every key and channel, so that several gateways (or
	// fleets) can share one Redis. Default DefaultStateKeyPrefix.
	KeyPrefix string `yaml:"key_prefix"`
	// Timeout bounds each Redis operation. Default DefaultStateTimeout
	// (250ms); at most MaxStateTimeout.
	Timeout time.Duration `yaml:"timeout"`
}

// Shared reports whether the state is shared through Redis.
func (s StateConfig) Shared() bool { return s.Backend == "redis" }

func (s *StateConfig) validate() error {
	switch s.Backend {
	case "", "memory":
		s.Backend = "memory"
		if s.Redis != (RedisConfig{}) {
			return fmt.Errorf("state.redis: set, but state.backend is %s (set backend: redis to use it)", s.Backend)
		}
		return nil
	case "redis":
	default:
		return fmt.Errorf("state.backend: %q is not memory or redis", s.Backend)
	}
	r := &s.Redis
	if r.URL == "" {
		r.URL = os.Getenv(RedisURLEnv)
	}
	if r.URL == "" {
		return fmt.Errorf("state.redis.url: required with backend redis (or set %s)", RedisURLEnv)
	}
	if err := checkRedisURL(r.URL); err != nil {
		return fmt.Errorf("state.redis.url: %v", err)
	}
	if r.KeyPrefix == "" {
		r.KeyPrefix = DefaultStateKeyPrefix
	}
	switch {
	case r.Timeout < 0:
		return fmt.Errorf("state.redis.timeout: %s must not be negative", r.Timeout)
	case r.Timeout == 0:
		r.Timeout = DefaultStateTimeout
	case r.Timeout > MaxStateTimeout:
		return fmt.Errorf("state.redis.timeout: %s is above the ceiling of %s", r.Timeout, MaxStateTimeout)
	}
	return nil
}

// needsTaskKey refuses state.backend redis without tasks.key_env: the
// replicas name callers in Redis by digests keyed with the task key (see the
// gateway's callerKey), so they must all have the same one; without it each
// would key them its own way and none would find another's runs, caps or
// cancellations.
func (s StateConfig) needsTaskKey(t TasksConfig) error {
	if s.Shared() && t.KeyEnv == "" {
		return errors.New("tasks.key_env: required with state.backend redis: every replica keys the caller digests it shares in Redis with the task key, so all need the same one (e.g. key_env: MCPGATE_TASK_KEY, with MCPGATE_TASK_KEY=$(openssl rand -base64 32) on every replica)")
	}
	return nil
}

// checkRedisURL checks what go-redis's ParseURL needs, naming the problem
// without echoing a password.
func checkRedisURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return fmt.Errorf("not a URL (redis://host:port/db): %v", err)
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return fmt.Errorf("%s has no host (redis://host:port/db)", u.Redacted())
		}
		if db := strings.Trim(u.Path, "/"); db != "" {
			var n int
			if _, err := fmt.Sscanf(db, "%d", &n); err != nil || fmt.Sprint(n) != db || n < 0 {
				return fmt.Errorf("%s: the path must be a database number, not %q", u.Redacted(), db)
			}
		}
	case "unix":
		if u.Path == "" {
			return fmt.Errorf("%s has no socket path (unix:///path/to/redis.sock)", u.Redacted())
		}
	default:
		return fmt.Errorf("%s: the scheme must be redis, rediss or unix", u.Redacted())
	}
	return nil
}
