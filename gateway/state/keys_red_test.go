package state

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// TestKeysInjective: what two different upstreams, callers or dedup keys
// hold never lands on one Redis key, whatever ':' or '%' their names have
// (red-team finding 3 of issue 24: upstream names may hold ':', and the
// keys joined their parts with ':'). Each row takes a slot or a claim
// through one name and checks that the other, a distinct name that an
// unescaped join would have mapped to the same key, is not touched.
func TestKeysInjective(t *testing.T) {
	s, srv := openRedis(t)
	ctx := t.Context()
	const hexCaller = "0123abcd"
	for _, tt := range []struct {
		name string
		// first is done, then second must succeed.
		first, second func(ctx context.Context) (bool, error)
	}{{
		// runs:a:<caller> (caller's cap on a) against runs:a:<caller> (the
		// engine cap of an upstream named "a:<caller>").
		name: "engine cap vs per-caller cap",
		first: func(ctx context.Context) (bool, error) {
			_, refused, _, err := s.Engine("a:"+hexCaller).Admit(ctx, "someone", 1, 0)
			return refused == 0, err
		},
		second: func(ctx context.Context) (bool, error) {
			_, refused, _, err := s.Engine("a").Admit(ctx, hexCaller, 0, 1)
			return refused == 0, err
		},
	}, {
		name: "per-caller caps of two upstreams",
		first: func(ctx context.Context) (bool, error) {
			_, refused, _, err := s.Engine("b:c").Admit(ctx, "d", 0, 1)
			return refused == 0, err
		},
		second: func(ctx context.Context) (bool, error) {
			_, refused, _, err := s.Engine("b").Admit(ctx, "c:d", 0, 1)
			return refused == 0, err
		},
	}, {
		name: "run records of two upstreams",
		first: func(ctx context.Context) (bool, error) {
			return s.Engine("e:f").Claim(ctx, "k", playbook.RunRecord{Path: "p", Begun: time.Now()}, time.Minute)
		},
		second: func(ctx context.Context) (bool, error) {
			return s.Engine("e").Claim(ctx, "f:k", playbook.RunRecord{Path: "p", Begun: time.Now()}, time.Minute)
		},
	}, {
		name: "an escape written out against the character it escapes",
		first: func(ctx context.Context) (bool, error) {
			return s.Engine("g%3Ah").Claim(ctx, "k", playbook.RunRecord{Path: "p", Begun: time.Now()}, time.Minute)
		},
		second: func(ctx context.Context) (bool, error) {
			return s.Engine("g:h").Claim(ctx, "k", playbook.RunRecord{Path: "p", Begun: time.Now()}, time.Minute)
		},
	}, {
		name: "session caps of two callers",
		first: func(ctx context.Context) (bool, error) {
			_, ok, _, err := s.Sessions(ctx, "i%3Aj", 1)
			return ok, err
		},
		second: func(ctx context.Context) (bool, error) {
			_, ok, _, err := s.Sessions(ctx, "i:j", 1)
			return ok, err
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			if ok, err := tt.first(ctx); !ok || err != nil {
				t.Fatalf("first: %v, %v", ok, err)
			}
			if ok, err := tt.second(ctx); !ok || err != nil {
				t.Errorf("second: %v, %v; want it untouched by the first (a key shared by two names)", ok, err)
			}
		})
	}
	// Names without ':' or '%' keep the layout docs/state.md shows.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if _, _, _, err := s.Engine("noetl").Admit(ctx, hexCaller, 5, 5); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"t:runs:noetl", "t:runs:noetl:" + hexCaller, "t:run:e:f%3Ak", "t:run:e%3Af:k"} {
		if n, err := c.Exists(ctx, k).Result(); n != 1 || err != nil {
			t.Errorf("key %s: exists %d, %v", k, n, err)
		}
	}
}
