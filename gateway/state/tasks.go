package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TaskRecord is what the gateway keeps of one MCP task, so that
// tasks/list can list a caller's tasks on any replica.
type TaskRecord struct {
	// ID is the task id the client was given.
	ID string `json:"id"`
	// Caller is a digest of who made it (hex; never a credential).
	Caller string `json:"caller"`
	// Tool is the tool called.
	Tool string `json:"tool"`
	// Status is the task's status as last recorded (working, completed,
	// failed, cancelled, input_required).
	Status string `json:"status"`
	// Created and Updated are when the task was made and last recorded.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// TTL is how long the record is kept from Created.
	TTL time.Duration `json:"ttl"`
}

// MaxTasksPerCaller bounds the records one caller has at once in a
// store: past it, Put drops the caller's oldest. A caller that makes more
// tasks than this within their ttl would list only the newest anyway.
const MaxTasksPerCaller = 1000

// ErrNoTask is Get's error for an id it does not hold for that caller.
var ErrNoTask = errors.New("state: no such task")

// Tasks stores task records.
type Tasks interface {
	// Put records t (a new task, or a change of its status), kept until
	// t.Created + t.TTL.
	Put(ctx context.Context, t TaskRecord) error
	// Get returns caller's record of task id, or ErrNoTask: also when the
	// record is another caller's, so that a task id someone else holds
	// reveals nothing (not even that the task exists).
	Get(ctx context.Context, caller, id string) (*TaskRecord, error)
	// List returns caller's records, newest first, at most limit (limit
	// <= 0: all, within MaxTasksPerCaller).
	List(ctx context.Context, caller string, limit int) ([]TaskRecord, error)
}

func checkTask(t *TaskRecord) error {
	switch {
	case t.ID == "":
		return errors.New("state: a task record needs an id")
	case t.Caller == "":
		return errors.New("state: a task record needs a caller")
	case t.TTL <= 0:
		return fmt.Errorf("state: task %s: ttl %s must be positive", t.ID, t.TTL)
	}
	return nil
}

// MemoryTasks holds task records in this process. Safe for concurrent use.
type MemoryTasks struct {
	now func() time.Time

	mu       sync.Mutex
	byID     map[string]*TaskRecord
	byCaller map[string][]string // ids, oldest first
	puts     int                 // since the last sweep
}

// sweepEvery is how many Puts pass between sweeps of every caller's expired
// records: a caller that never comes back is not kept past its records' ttl
// by much.
const sweepEvery = 1024

// NewMemoryTasks returns an empty store.
func NewMemoryTasks() *MemoryTasks {
	return &MemoryTasks{now: time.Now, byID: map[string]*TaskRecord{}, byCaller: map[string][]string{}}
}

func expired(t *TaskRecord, now time.Time) bool { return !now.Before(t.Created.Add(t.TTL)) }

// Put records t.
func (m *MemoryTasks) Put(_ context.Context, t TaskRecord) error {
	if err := checkTask(&t); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if m.puts++; m.puts >= sweepEvery {
		m.puts = 0
		for c := range m.byCaller {
			m.prune(c, now)
		}
	} else {
		m.prune(t.Caller, now)
	}
	if old := m.byID[t.ID]; old != nil && old.Caller != t.Caller {
		return fmt.Errorf("state: task %s belongs to another caller", t.ID)
	} else if old == nil {
		ids := append(m.byCaller[t.Caller], t.ID)
		if len(ids) > MaxTasksPerCaller {
			delete(m.byID, ids[0])
			ids = ids[1:]
		}
		m.byCaller[t.Caller] = ids
	}
	m.byID[t.ID] = &t
	return nil
}

// prune drops caller's expired records.
func (m *MemoryTasks) prune(caller string, now time.Time) {
	ids := m.byCaller[caller]
	kept := ids[:0]
	for _, id := range ids {
		if t := m.byID[id]; t != nil && !expired(t, now) {
			kept = append(kept, id)
		} else {
			delete(m.byID, id)
		}
	}
	if len(kept) == 0 {
		delete(m.byCaller, caller)
	} else {
		m.byCaller[caller] = kept
	}
}

// Get returns caller's record of task id.
func (m *MemoryTasks) Get(_ context.Context, caller, id string) (*TaskRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.byID[id]
	if t == nil || t.Caller != caller || caller == "" || expired(t, m.now()) {
		return nil, ErrNoTask
	}
	cp := *t
	return &cp, nil
}

// List returns caller's records, newest first.
func (m *MemoryTasks) List(_ context.Context, caller string, limit int) ([]TaskRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(caller, m.now())
	var out []TaskRecord
	for _, id := range slices.Backward(m.byCaller[caller]) {
		out = append(out, *m.byID[id])
	}
	sortNewest(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// sortNewest orders records newest first (by Created, then id).
func sortNewest(ts []TaskRecord) {
	slices.SortStableFunc(ts, func(a, b TaskRecord) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// Tasks returns the store's task records, in Redis:
//
//	<prefix>task:<id>         the record (JSON); ttl: until Created + TTL
//	<prefix>tasks:<caller>    sorted set of the caller's task ids (as key parts), scored by expiry (unix ms)
//
// The id and caller are escaped by keyPart.
func (s *Redis) Tasks() Tasks { return &redisTasks{s: s} }

type redisTasks struct{ s *Redis }

var putTaskScript = redis.NewScript(`
local owner = redis.call('GET', KEYS[1])
if owner then
  local t = cjson.decode(owner)
  if t['caller'] ~= ARGV[4] then return -1 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
local n = redis.call('ZCARD', KEYS[2])
if n > tonumber(ARGV[6]) then
  local old = redis.call('ZPOPMIN', KEYS[2], n - tonumber(ARGV[6]))
  for i = 1, #old, 2 do redis.call('DEL', ARGV[7] .. old[i]) end
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], last[2])
return 1`)

func (r *redisTasks) Put(ctx context.Context, t TaskRecord) error {
	if err := checkTask(&t); err != nil {
		return err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	var n int
	p := r.s.prefix
	err = r.s.do(ctx, "task_put", func(ctx context.Context) error {
		var err error
		n, err = putTaskScript.Run(ctx, r.s.client, []string{p + "task:" + keyPart(t.ID), p + "tasks:" + keyPart(t.Caller)},
			b, t.Created.Add(t.TTL).UnixMilli(), time.Now().UnixMilli(), t.Caller, keyPart(t.ID), MaxTasksPerCaller, p+"task:").Int()
		return err
	})
	if err == nil && n < 0 {
		return fmt.Errorf("state: task %s belongs to another caller", t.ID)
	}
	return err
}

func (r *redisTasks) Get(ctx context.Context, caller, id string) (*TaskRecord, error) {
	var b []byte
	err := r.s.do(ctx, "task_get", func(ctx context.Context) error {
		var err error
		b, err = r.s.client.Get(ctx, r.s.prefix+"task:"+keyPart(id)).Bytes()
		return err
	})
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, ErrNoTask
	}
	var t TaskRecord
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("state: task %s: the stored record does not decode: %v", id, err)
	}
	if t.Caller != caller || caller == "" {
		return nil, ErrNoTask
	}
	return &t, nil
}

func (r *redisTasks) List(ctx context.Context, caller string, limit int) ([]TaskRecord, error) {
	var out []TaskRecord
	p := r.s.prefix
	err := r.s.do(ctx, "task_list", func(ctx context.Context) error {
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		ids, err := r.s.client.ZRangeByScore(ctx, p+"tasks:"+keyPart(caller), &redis.ZRangeBy{Min: "(" + now, Max: "+inf"}).Result()
		if err != nil || len(ids) == 0 {
			return err
		}
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = p + "task:" + id
		}
		vals, err := r.s.client.MGet(ctx, keys...).Result()
		if err != nil {
			return err
		}
		for _, v := range vals {
			sv, ok := v.(string)
			if !ok {
				continue // expired between the two reads
			}
			var t TaskRecord
			if json.Unmarshal([]byte(sv), &t) == nil && t.Caller == caller {
				out = append(out, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortNewest(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
