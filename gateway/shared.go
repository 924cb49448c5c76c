package gateway

import (
	"context"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/gateway/state"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// Shared state (docs/state.md). With state.backend redis, New opens the
// store (a wrong URL, or a Redis that does not answer, is a start-up error),
// and:
//
//   - each playbook runner gets the store's view of its engine
//     (playbook.Options.Shared): the dedup table, who waits for a run, and
//     the run caps count the fleet;
//   - a stateless gateway's notifications/cancelled that matches no call in
//     flight here is published, and every replica cancels the calls it holds
//     for that caller and request id (cancel.go's registry). A REST call's
//     path is not touched: only a cancellation that misses publishes;
//   - a stateful gateway's max_sessions_per_caller counts the fleet's
//     sessions (frontdoor.go's session book);
//   - task records are kept in Redis (Gateway.TaskRecords), else in memory.
//
// When Redis fails afterwards, each of these goes on with this process's
// own state (state.Redis: a rate-limited warning, and
// mcpgate_state_errors_total{op}).

// openShared opens the configured shared state: nil with backend memory.
// It sets the key of the caller digests first (callerKey).
func (g *Gateway) openShared(ctx context.Context) error {
	var err error
	if g.callers, err = callerKey(g.cfg); err != nil {
		return err
	}
	g.noetlCalls.digests = g.callers
	if !g.cfg.State.Shared() {
		g.taskRecords = state.NewMemoryTasks()
		if p := g.opts.Previous; p != nil {
			if m, ok := p.taskRecords.(*state.MemoryTasks); ok {
				// One process's records across its reloads: a session
				// begun before one lists its tasks on this gateway's door
				// from now on (follow.go), and so does any new request.
				g.taskRecords = m
			}
		}
		return nil
	}
	r := g.cfg.State.Redis
	s, err := state.Open(ctx, state.Options{URL: r.URL, KeyPrefix: r.KeyPrefix, Timeout: r.Timeout, Logger: g.logger})
	if err != nil {
		return err
	}
	g.shared = s
	g.taskRecords = s.Tasks()
	g.sharedStop = make(chan struct{})
	return nil
}

// callerKey is the key of the caller digests (package caller): what a
// session, a task id, a run's dedup key and per-caller caps, a cancellation
// and a task record name a caller by, in this process and in Redis.
//
//   - With a task key (tasks.key_env), derived from it (caller.NewKey, under
//     a label of its own): every replica given the same key digests a caller
//     alike, across restarts and reloads, so task ids made before a restart
//     still open for their caller, and a fleet shares its callers' state.
//   - Without one, the process's random key (caller.ProcessKey): the same
//     across reloads, meaningless to another process. With state.backend
//     redis that would leave each replica naming callers its own way, so
//     there a task key is required: config validation refuses a missing
//     tasks.key_env, and an unset or short variable is an error here.
//     Without Redis, an unusable variable is left to the task door, which
//     refuses it when it seals task ids.
func callerKey(cfg *Config) (*caller.Key, error) {
	secret, err := taskSecret(cfg.Tasks)
	switch {
	case err != nil && cfg.State.Shared():
		return nil, err
	case err == nil && secret != "":
		return caller.NewKey([]byte(secret)), nil
	}
	return caller.ProcessKey(), nil
}

// engineOptions are a playbook engine's options for its runner: the
// catalog's, with the fleet's view of the engine when state is shared.
func (g *Gateway) engineOptions(name string, opts *playbook.Options) *playbook.Options {
	if g.shared == nil {
		return opts
	}
	o := *opts
	o.Shared = g.shared.Engine(name)
	return &o
}

// closeShared releases the store's leases and connections.
func (g *Gateway) closeShared() {
	if g.shared != nil {
		close(g.sharedStop)
		_ = g.shared.Close()
	}
}

// TaskRecords is the store of task records: Redis with state.backend
// redis, else this process's memory.
func (g *Gateway) TaskRecords() state.Tasks { return g.taskRecords }

// shareInflight wires a stateless front door's registry of calls in flight
// to the fleet: a cancellation it misses is published, and one another
// replica published cancels the calls it holds.
func (g *Gateway) shareInflight(in *inflight) {
	in.digests = g.callers
	if g.shared == nil {
		return
	}
	s := g.shared
	var limit publishLimit
	in.publish = func(who [32]byte, id string) {
		if !limit.allow(time.Now()) {
			return
		}
		_ = s.PublishCancel(context.Background(), state.Cancellation{Caller: hex.EncodeToString(who[:]), ID: id})
	}
	s.OnCancel(func(c state.Cancellation) {
		who, err := hex.DecodeString(c.Caller)
		if err != nil || len(who) != 32 {
			return
		}
		in.cancelDigest([32]byte(who), c.ID)
	})
}

// shareSessions gives a stateful front door's session book the fleet-wide
// count per caller, and sweeps the sessions go-sdk closed on its own (idle
// timeout) every renewal period, so that their slots stop counting on other
// replicas too (the book alone notices them only at its next reserve).
func (g *Gateway) shareSessions(b *sessionBook) {
	b.digests = g.callers
	if g.shared == nil || b.perCaller <= 0 {
		return
	}
	b.fleet = g.fleetSessions()
	stop, every := g.sharedStop, sessionSweepEvery
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b.sweep()
			}
		}
	}()
}

// sessionSweepEvery is how often shareSessions sweeps: the leases' renewal
// period, so a closed session stops counting within about LeaseTTL/3.
var sessionSweepEvery = state.LeaseTTL / 3

// fleetSessions is the session book's fleet-wide count per caller.
func (g *Gateway) fleetSessions() func(ctx context.Context, who [32]byte, limit int) (func(), bool, error) {
	s := g.shared
	return func(ctx context.Context, who [32]byte, limit int) (func(), bool, error) {
		release, ok, _, err := s.Sessions(ctx, hex.EncodeToString(who[:]), limit)
		return release, ok, err
	}
}

// registerState adds mcpgate_state_errors_total{op} to the registry: read
// from the store's own counts when scraped, so an operation pays nothing for
// it. With backend memory the series are there, at 0.
func (m *metrics) registerState(s *state.Redis) {
	if m == nil {
		return
	}
	for _, op := range state.Ops {
		f := func() float64 { return 0 }
		if s != nil {
			f = func() float64 { return float64(s.Errors(op)) }
		}
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "mcpgate_state_errors_total",
			Help:        "Shared-state (Redis) operations that failed, by op; each is done with this process's own state instead.",
			ConstLabels: prometheus.Labels{"op": op},
		}, f))
	}
}

// record keeps the task record of a task request's answer in the store of
// task records (Gateway.TaskRecords), for tasks/list: a task created, and a
// task tasks/get or tasks/cancel found ended. A task still working is not
// written again on each poll. A store that fails is counted and warned of
// by the store; the answer goes out all the same.
func (d *taskDoor) record(r *http.Request, method string, result any, rerr *jsonrpc.Error) {
	store := d.g.taskRecords
	if rerr != nil || store == nil {
		return
	}
	var task taskWire
	switch res := result.(type) {
	case taskWire:
		if task = res; task.Status == "working" {
			return
		}
	case map[string]any:
		if task, _ = res["task"].(taskWire); method != "tools/call" || task.TaskID == "" {
			return
		}
	default:
		return
	}
	c, ok := openTask(d.aead, task.TaskID)
	if !ok {
		return
	}
	t := d.byPath[c.Path]
	if t == nil {
		return
	}
	who := d.g.callers.Digest(caller.FromRequest(r))
	_ = store.Put(r.Context(), state.TaskRecord{
		ID: task.TaskID, Caller: hex.EncodeToString(who[:]), Tool: t.Tool.Name, Status: task.Status,
		Created: time.UnixMilli(c.Created), Updated: d.now(), TTL: time.Duration(c.TTL) * time.Millisecond,
	})
}

// maxCancelPublishes bounds the cancellations one replica publishes per
// second. Every replica looks each one up in its registry of calls in
// flight, so a client sending cancellations for calls that exist nowhere
// must not make every replica scan for them without bound; past it a
// cancellation that missed here is dropped (the call it names, if any,
// ends on its own terms). A thousand a second is far above what clients
// that cancel what they started send.
const maxCancelPublishes = 1000

// maxSharedRequestID bounds the request id (as the registry keys it: "s"
// and a string id, or "n" and a number) of a cancellation published to the
// other replicas. An id may be as long as max_body_bytes; published, each
// one is sent by Redis to every replica, and a few such ids fill a
// subscriber's output buffer past Redis' pubsub limit (32 MiB by default),
// where Redis drops the subscription of every replica at once. Clients use
// counters or UUIDs: a call whose id is longer is cancelled only on the
// replica that holds it.
const maxSharedRequestID = 256

// publishLimit counts publishes per one-second window. Safe for concurrent
// use.
type publishLimit struct {
	mu     sync.Mutex
	window int64 // unix second
	n      int
}

func (l *publishLimit) allow(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec := now.Unix(); sec != l.window {
		l.window, l.n = sec, 0
	}
	if l.n >= maxCancelPublishes {
		return false
	}
	l.n++
	return true
}

// sweep forgets the sessions go-sdk has closed on its own (idle timeout),
// freeing their fleet slots.
func (b *sessionBook) sweep() {
	live := map[string]bool{}
	for ss := range b.server.Sessions() {
		live[ss.ID()] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.owners {
		if !live[id] {
			delete(b.owners, id)
			b.unlease(id)
		}
	}
}
