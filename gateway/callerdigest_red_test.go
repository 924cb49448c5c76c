package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestCallerDigestKeyed: what a fleet writes to Redis about a caller (run
// leases, task records) is a keyed digest, never a plain SHA-256 of the
// Authorization header, which anyone who can read Redis could test guesses
// against offline — Basic credentials and low-entropy tokens fall to a
// dictionary (red-team finding 1 of issue 24). The two replicas still agree
// on the caller: the key comes from the task key they share.
func TestCallerDigestKeyed(t *testing.T) {
	t.Setenv("MCPGATE_TEST_TASK_KEY", strings.Repeat("k", 32))
	f := newFleet(t, &engine.Options{Step: time.Hour}, Playbooks{PollInterval: 100 * time.Millisecond, Timeout: time.Minute},
		func(c *Config) { c.Tasks = TasksConfig{KeyEnv: "MCPGATE_TEST_TASK_KEY"} })
	const basic = "Basic YWxpY2U6czNjcmV0" // alice:s3cret
	h := http.Header{"Authorization": {basic}}
	conn := rawPOST(t, f.url[0], call(1, "demo_slow", `{"label":"d"}`), h, false)
	defer conn.Close()
	waitFor(t, "the run to start on A", func() bool { return f.e.Counts().Started == 1 })
	b := &taskEnv{g: f.g[1], e: f.e, url: f.url[1]}
	b.create(t, basic, "demo_slow", `{"label":"e"}`)

	c := redis.NewClient(&redis.Options{Addr: f.redis.Addr})
	defer c.Close()
	dump := redisDump(t, c)
	if !strings.Contains(dump, "fleet:runs:noetl:") || !strings.Contains(dump, "fleet:tasks:") {
		t.Fatalf("the run lease and the task record are not in Redis:\n%s", dump)
	}
	for _, guess := range []string{"authorization\x00" + basic, basic, "YWxpY2U6czNjcmV0"} {
		sum := sha256.Sum256([]byte(guess))
		if d := hex.EncodeToString(sum[:]); strings.Contains(dump, d) || strings.Contains(dump, d[:32]) {
			t.Errorf("Redis holds SHA-256(%q), testable offline against guesses of the header:\n%s", guess, dump)
		}
	}
	// Both replicas name alice alike: her task, made on B, is listed on A.
	a := &taskEnv{g: f.g[0], e: f.e, url: f.url[0]}
	if res := a.must(t, basic, "tasks/list", `{}`); len(res["tasks"].([]any)) != 1 {
		t.Errorf("alice's tasks listed on A: %v; want the one made on B", res)
	}
}

// fleetTaskKey is the tasks section of a test fleet: state.backend redis
// needs a task key, the one the replicas key their caller digests with.
func fleetTaskKey(t testing.TB) TasksConfig {
	t.Setenv("MCPGATE_TEST_FLEET_KEY", strings.Repeat("f", 32))
	return TasksConfig{KeyEnv: "MCPGATE_TEST_FLEET_KEY"}
}

// redisDump is every key of c with its value, one per line.
func redisDump(t *testing.T, c *redis.Client) string {
	t.Helper()
	ctx := t.Context()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		var v any
		switch typ, _ := c.Type(ctx, k).Result(); typ {
		case "string":
			v, _ = c.Get(ctx, k).Result()
		case "hash":
			v, _ = c.HGetAll(ctx, k).Result()
		case "zset":
			v, _ = c.ZRange(ctx, k, 0, -1).Result()
		default:
			v = typ
		}
		b.WriteString(k + " = ")
		b.WriteString(strings.ReplaceAll(fmtAny(v), "\n", " "))
		b.WriteByte('\n')
	}
	return b.String()
}

func fmtAny(v any) string {
	var b strings.Builder
	switch v := v.(type) {
	case string:
		b.WriteString(v)
	case map[string]string:
		for k, x := range v {
			b.WriteString(k + ":" + x + " ")
		}
	case []string:
		b.WriteString(strings.Join(v, " "))
	}
	return b.String()
}

// TestRedisNeedsTaskKey: with state.backend redis, the replicas must share
// the key their caller digests are keyed with (the task key): a fleet
// without one is a start-up error naming tasks.key_env, rather than
// replicas that each key digests their own way and silently stop sharing
// dedup, caps and cancellations.
func TestRedisNeedsTaskKey(t *testing.T) {
	e := engine.New(nil)
	for _, tt := range []struct {
		name string
		key  string // tasks.key_env
		want string
	}{
		{"no key_env", "", "tasks.key_env: required with state.backend redis"},
		{"key_env names an unset variable", "MCPGATE_TEST_UNSET_TASK_KEY", "tasks.key_env: $MCPGATE_TEST_UNSET_TASK_KEY is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{
				Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &Playbooks{}}},
				State:     StateConfig{Backend: "redis", Redis: RedisConfig{URL: "redis://127.0.0.1:1/0", Timeout: 100 * time.Millisecond}},
				Tasks:     TasksConfig{KeyEnv: tt.key},
			}
			g, err := New(t.Context(), cfg, nil)
			if err == nil {
				g.Close()
				t.Fatalf("New: no error; want one saying %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v; want it to say %q", err, tt.want)
			}
		})
	}
}
