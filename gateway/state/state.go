// Package state is what the replicas of a gateway fleet share: the playbook
// runners' dedup table, waiter counts and run caps (upstream/playbook's
// Shared), the stateful session cap per caller, the cancellations that reach
// a replica which does not hold the call, and task records.
//
// Two backends: memory (one process: the default, nothing to run) and Redis
// (a fleet; Valkey works the same). With memory, the gateway keeps today's
// per-process behaviour and this package only holds task records. With
// Redis, every operation has a short timeout (Options.Timeout); when Redis
// fails, the operation reports an error, the caller does what it does alone,
// mcpgate_state_errors_total{op} counts it and a warning is logged at most
// once per WarnEvery with the count since the last one. After a failure the
// store is taken as down for DownFor and operations fail at once, so that an
// outage costs a call nothing but the decision to go it alone.
//
// Nothing secret reaches Redis: dedup keys are SHA-256 hashes, callers are
// keyed digests (package caller's HMAC under a key derived from the task
// key, which never reaches Redis; or the playbook runner's hex of one), task
// records hold a digest of their caller, and cancellations carry a digest
// and a JSON-RPC request id.
package state

import (
	"time"
)

// Backends.
const (
	BackendMemory = "memory"
	BackendRedis  = "redis"
)

// Defaults and bounds; each is documented in docs/state.md.
const (
	// DefaultTimeout bounds one Redis operation (and the dial of a new
	// connection): a store on the same network answers in well under a
	// millisecond, so 250 ms only trips on a store that is not answering.
	DefaultTimeout = 250 * time.Millisecond
	// DefaultKeyPrefix starts every key and channel.
	DefaultKeyPrefix = "mcpgate:"
	// LeaseTTL is how long a slot (a playbook run, a stateful session)
	// counts against a fleet-wide cap after its replica last renewed it.
	// Replicas renew their slots every LeaseTTL/3; a replica that dies
	// stops, and its slots stop counting within LeaseTTL.
	LeaseTTL = 15 * time.Second
	// DownFor is how long after a failed operation the store is taken to be
	// down: operations fail at once meanwhile, then the next one tries.
	DownFor = time.Second
	// WarnEvery bounds the warnings of an outage: the first failure is
	// logged, then at most one line per WarnEvery with the count.
	WarnEvery = 10 * time.Second
)

// Ops are the values of mcpgate_state_errors_total's op label.
var Ops = [...]string{
	"connect", "admit", "claim", "record", "update", "drop", "join", "leave", "waiters", "renew", "release",
	"session", "publish", "task_put", "task_get", "task_list",
}

func opIndex(op string) int {
	for i, o := range Ops {
		if o == op {
			return i
		}
	}
	panic("state: unknown op " + op)
}
