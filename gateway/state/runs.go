package state

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// Engine returns the playbook.Shared of the engine upstream name: its keys
// are the store's prefix, "run:" or "runs:", the name and the dedup key or
// the caller.
//
//	<prefix>run:<upstream>:<dedup key>     hash: id, path, begun (unix ms), state, waiters; ttl: timeout + dedup window, then the window once succeeded
//	<prefix>runs:<upstream>                sorted set of run leases (max_runs)
//	<prefix>runs:<upstream>:<caller>       sorted set of one caller's run leases (max_runs_per_caller)
func (s *Redis) Engine(name string) playbook.Shared {
	return &engine{s: s, runKey: s.prefix + "run:" + name + ":", capKey: s.prefix + "runs:" + name}
}

type engine struct {
	s      *Redis
	runKey string
	capKey string
}

var _ playbook.Shared = (*engine)(nil)

var (
	claimScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'path', ARGV[1], 'begun', ARGV[2], 'waiters', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)
	updateScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'path', ARGV[2], 'begun', ARGV[3], 'state', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`)
	countScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HINCRBY', KEYS[1], 'waiters', ARGV[1])`)
)

func (e *engine) Admit(ctx context.Context, caller string, maxRuns, maxPerCaller int) (func(), int, int, error) {
	return e.s.acquire(ctx, "admit", []string{e.capKey, e.capKey + ":" + caller}, []int{maxRuns, maxPerCaller})
}

func (e *engine) Claim(ctx context.Context, key string, rec playbook.RunRecord, ttl time.Duration) (bool, error) {
	var ok bool
	err := e.s.do(ctx, "claim", func(ctx context.Context) error {
		n, err := claimScript.Run(ctx, e.s.client, []string{e.runKey + key}, rec.Path, rec.Begun.UnixMilli(), ttl.Milliseconds()).Int()
		ok = n == 1
		return err
	})
	return ok, err
}

func (e *engine) Record(ctx context.Context, key string) (*playbook.RunRecord, error) {
	var m map[string]string
	err := e.s.do(ctx, "record", func(ctx context.Context) error {
		var err error
		m, err = e.s.client.HGetAll(ctx, e.runKey+key).Result()
		return err
	})
	if err != nil || len(m) == 0 {
		return nil, err
	}
	begun, _ := strconv.ParseInt(m["begun"], 10, 64)
	waiters, _ := strconv.ParseInt(m["waiters"], 10, 64)
	return &playbook.RunRecord{ExecutionID: m["id"], Path: m["path"], Begun: time.UnixMilli(begun), State: playbook.State(m["state"]), Waiters: waiters}, nil
}

func (e *engine) Update(ctx context.Context, key string, rec playbook.RunRecord, ttl time.Duration) error {
	return e.s.do(ctx, "update", func(ctx context.Context) error {
		return updateScript.Run(ctx, e.s.client, []string{e.runKey + key}, rec.ExecutionID, rec.Path, rec.Begun.UnixMilli(), string(rec.State), ttl.Milliseconds()).Err()
	})
}

func (e *engine) Drop(ctx context.Context, key string) error {
	return e.s.do(ctx, "drop", func(ctx context.Context) error {
		return e.s.client.Del(ctx, e.runKey+key).Err()
	})
}

func (e *engine) count(ctx context.Context, op, key string, by int) (int64, error) {
	var n int64
	err := e.s.do(ctx, op, func(ctx context.Context) error {
		var err error
		n, err = countScript.Run(ctx, e.s.client, []string{e.runKey + key}, by).Int64()
		return err
	})
	return n, err
}

func (e *engine) Join(ctx context.Context, key string) (int64, error) {
	return e.count(ctx, "join", key, 1)
}

func (e *engine) Leave(ctx context.Context, key string) (int64, error) {
	return e.count(ctx, "leave", key, -1)
}

func (e *engine) Waiters(ctx context.Context, key string) (int64, error) {
	return e.count(ctx, "waiters", key, 0)
}
