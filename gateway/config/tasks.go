package config

import (
	"fmt"
	"regexp"
	"time"
)

// DefaultTaskTTL is how long a task is kept when the client asks for no
// ttl, and the longest ttl granted.
const DefaultTaskTTL = time.Hour

// TasksConfig configures MCP tasks for playbook tools (see the gateway's
// tasks.go: task-augmented tools/call, tasks/get, tasks/result,
// tasks/cancel).
//
//	tasks:
//	  key_env: MCPGATE_TASK_KEY   # the variable holding the key
//	  ttl: 1h
type TasksConfig struct {
	// KeyEnv names the environment variable that holds the key sealing
	// task ids: any text of at least 32 bytes (e.g. `openssl rand -base64
	// 32`). Every replica of a stateless gateway needs the same key, so that
	// any of them can answer for a task another one made. Empty (the
	// default): a random key made at start-up, so tasks work only against
	// this process and not across a restart; a warning says so.
	KeyEnv string `yaml:"key_env"`
	// TTL is how long a task (its id) stays valid, from its creation, when
	// the client asks for no ttl, and the longest granted: a client's ttl is
	// granted within [the playbook's timeout, TTL]. Default DefaultTaskTTL
	// (1h).
	TTL time.Duration `yaml:"ttl"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c *TasksConfig) validate() error {
	if c.TTL < 0 {
		return fmt.Errorf("tasks.ttl: %s must not be negative", c.TTL)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTaskTTL
	}
	if c.KeyEnv != "" && !envName.MatchString(c.KeyEnv) {
		return fmt.Errorf("tasks.key_env: %q is not an environment variable name", c.KeyEnv)
	}
	return nil
}
