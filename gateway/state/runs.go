package state

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// Engine returns the playbook.Shared of the engine upstream name: its keys
// are the store's prefix, "run:" or "runs:", the name and the dedup key or
// the caller, each escaped by keyPart (an upstream's name may hold ':').
//
//	<prefix>run:<upstream>:<dedup key>     hash: id, path, begun (unix ms), state, waiters, claimed (Redis' time, unix ms), claim (the claim's token); ttl: timeout + dedup window, then the window once succeeded
//	<prefix>runs:<upstream>                sorted set of run leases (max_runs)
//	<prefix>runs:<upstream>:<caller>       sorted set of one caller's run leases (max_runs_per_caller)
func (s *Redis) Engine(name string) playbook.Shared {
	return &engine{s: s, runKey: s.prefix + "run:" + keyPart(name) + ":", capKey: s.prefix + "runs:" + keyPart(name)}
}

type engine struct {
	s      *Redis
	runKey string
	capKey string
}

var _ playbook.Shared = (*engine)(nil)

var (
	// claimScript claims KEYS[1] unless it is held: a record with an
	// execution id, or a claim made less than ARGV[4] ms ago (server
	// time: 'claimed'). An older claim without an id is taken over
	// (playbook.StaleClaimAfter).
	claimScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then
  local id = redis.call('HGET', KEYS[1], 'id')
  local claimed = tonumber(redis.call('HGET', KEYS[1], 'claimed'))
  if (id and id ~= '') or not claimed or now - claimed <= tonumber(ARGV[4]) then return 0 end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'path', ARGV[1], 'begun', ARGV[2], 'waiters', 1, 'claimed', now, 'claim', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)
	// recordScript is HGETALL with the server's time, for a claim's age.
	recordScript = redis.NewScript(`
local t = redis.call('TIME')
return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), redis.call('HGETALL', KEYS[1])}`)
	// updateScript writes KEYS[1] if it exists and is the claim ARGV[6]'s
	// ("": anyone's): -1 when another claim took it over. The check and
	// the write are one step, so a replica whose claim was taken over
	// (playbook.ErrClaimLost) never writes over the new claim's run.
	updateScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[6] ~= '' and redis.call('HGET', KEYS[1], 'claim') ~= ARGV[6] then return -1 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'path', ARGV[2], 'begun', ARGV[3], 'state', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`)
	// dropScript deletes KEYS[1] if it is the claim ARGV[1]'s ("": anyone's):
	// -1 when another claim holds it.
	dropScript = redis.NewScript(`
if ARGV[1] ~= '' and redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return -1 end
return redis.call('DEL', KEYS[1])`)
	countScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HINCRBY', KEYS[1], 'waiters', ARGV[1])`)
)

func (e *engine) Admit(ctx context.Context, caller string, maxRuns, maxPerCaller int) (func(), int, int, error) {
	return e.s.acquire(ctx, "admit", []string{e.capKey, e.capKey + ":" + keyPart(caller)}, []int{maxRuns, maxPerCaller})
}

func (e *engine) Claim(ctx context.Context, key string, rec playbook.RunRecord, ttl time.Duration) (bool, error) {
	var ok bool
	err := e.s.do(ctx, "claim", func(ctx context.Context) error {
		n, err := claimScript.Run(ctx, e.s.client, []string{e.runKey + keyPart(key)}, rec.Path, rec.Begun.UnixMilli(), ttl.Milliseconds(), playbook.StaleClaimAfter.Milliseconds(), rec.Claim).Int()
		ok = n == 1
		return err
	})
	return ok, err
}

func (e *engine) Record(ctx context.Context, key string) (*playbook.RunRecord, error) {
	var res []any
	err := e.s.do(ctx, "record", func(ctx context.Context) error {
		var err error
		res, err = recordScript.Run(ctx, e.s.client, []string{e.runKey + keyPart(key)}).Slice()
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("state: unexpected answer %v to a record", res)
	}
	now, _ := res[0].(int64)
	kv, _ := res[1].([]any)
	if len(kv) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		m[k], _ = kv[i+1].(string)
	}
	begun, _ := strconv.ParseInt(m["begun"], 10, 64)
	waiters, _ := strconv.ParseInt(m["waiters"], 10, 64)
	rec := &playbook.RunRecord{ExecutionID: m["id"], Path: m["path"], Begun: time.UnixMilli(begun), State: playbook.State(m["state"]), Waiters: waiters}
	if claimed, err := strconv.ParseInt(m["claimed"], 10, 64); err == nil && now > claimed {
		rec.Age = time.Duration(now-claimed) * time.Millisecond
	}
	return rec, nil
}

func (e *engine) Update(ctx context.Context, key string, rec playbook.RunRecord, ttl time.Duration) error {
	var n int
	err := e.s.do(ctx, "update", func(ctx context.Context) error {
		var err error
		n, err = updateScript.Run(ctx, e.s.client, []string{e.runKey + keyPart(key)}, rec.ExecutionID, rec.Path, rec.Begun.UnixMilli(), string(rec.State), ttl.Milliseconds(), rec.Claim).Int()
		return err
	})
	if err == nil && n < 0 {
		return playbook.ErrClaimLost
	}
	return err
}

func (e *engine) Drop(ctx context.Context, key, claim string) error {
	var n int
	err := e.s.do(ctx, "drop", func(ctx context.Context) error {
		var err error
		n, err = dropScript.Run(ctx, e.s.client, []string{e.runKey + keyPart(key)}, claim).Int()
		return err
	})
	if err == nil && n < 0 {
		return playbook.ErrClaimLost
	}
	return err
}

func (e *engine) count(ctx context.Context, op, key string, by int) (int64, error) {
	var n int64
	err := e.s.do(ctx, op, func(ctx context.Context) error {
		var err error
		n, err = countScript.Run(ctx, e.s.client, []string{e.runKey + keyPart(key)}, by).Int64()
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
