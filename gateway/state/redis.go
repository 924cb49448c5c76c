package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configures [Open].
type Options struct {
	// URL is the Redis URL (redis://, rediss://, unix://), as go-redis
	// reads it. Required.
	URL string
	// KeyPrefix starts every key and channel. Default DefaultKeyPrefix.
	KeyPrefix string
	// Timeout bounds each operation. Default DefaultTimeout.
	Timeout time.Duration
	// Logger receives the outage warnings. Nil: none.
	Logger *slog.Logger
}

// Redis is the shared state of a fleet, in Redis. Safe for concurrent use.
type Redis struct {
	client  *redis.Client
	prefix  string
	timeout time.Duration
	logger  *slog.Logger
	// replica names this process in lease members and cancellations.
	replica string

	errs      [len(Ops)]atomic.Uint64 // by opIndex
	downUntil atomic.Int64            // unix nanoseconds
	warnMu    sync.Mutex
	lastWarn  time.Time
	unwarned  int // failures since the last warning

	leaseMu sync.Mutex
	leases  map[uint64]*lease
	nextID  uint64

	subMu  sync.Mutex
	subs   []func(Cancellation)
	pubsub *redis.PubSub

	stop chan struct{}
	done sync.WaitGroup
}

type lease struct {
	keys   []string
	member string
}

// quiet drops go-redis's own log lines (a dial failure each, written to
// stderr past the gateway's logger): an outage is reported by fail, at
// most once per WarnEvery. go-redis's logger is global; Open sets it once.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// errDown is an operation not sent: the store failed less than DownFor ago.
var errDown = errors.New("state: redis is taken as down after a recent failure")

// Open makes the client of the Redis at o.URL, pings it, and renews the
// process's leases and listens for cancellations until Close. A URL that
// does not parse is an error; a Redis that does not answer at start-up is
// not: it is an outage like any other (a warning, the "connect" count, this
// process's own state until Redis answers), so that replicas started while
// Redis restarts serve rather than crash-loop.
func Open(ctx context.Context, o Options) (*Redis, error) {
	ropts, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("state.redis.url: %v", err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ropts.DialTimeout, ropts.ReadTimeout, ropts.WriteTimeout = timeout, timeout, timeout
	ropts.ContextTimeoutEnabled = true
	ropts.MaxRetries = -1   // a failure is reported at once: the caller goes it alone
	ropts.DialerRetries = 1 // one dial per attempt, within Timeout
	ropts.DisableIdentity = true
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Redis{
		client:  redis.NewClient(ropts),
		prefix:  o.KeyPrefix,
		timeout: timeout,
		logger:  o.Logger,
		replica: hex.EncodeToString(id[:]),
		leases:  map[uint64]*lease{},
		stop:    make(chan struct{}),
	}
	if s.prefix == "" {
		s.prefix = DefaultKeyPrefix
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	pctx, cancel := context.WithTimeout(ctx, max(timeout, time.Second))
	defer cancel()
	if err := s.client.Ping(pctx).Err(); err != nil {
		s.fail("connect", fmt.Errorf("%s does not answer at start-up: %v", ropts.Addr, err))
	}
	s.pubsub = s.client.Subscribe(context.Background(), s.prefix+"cancel")
	s.done.Add(2)
	go s.renewLoop()
	go s.listen()
	return s, nil
}

// Replica is this process's random name in the store.
func (s *Redis) Replica() string { return s.replica }

// Close stops renewing leases (they expire within LeaseTTL; those still held
// are released first) and closes the connections.
func (s *Redis) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	s.leaseMu.Lock()
	held := make([]*lease, 0, len(s.leases))
	for _, l := range s.leases {
		held = append(held, l)
	}
	clear(s.leases)
	s.leaseMu.Unlock()
	for _, l := range held {
		s.releaseLease(l)
	}
	_ = s.pubsub.Close()
	s.done.Wait()
	return s.client.Close()
}

// Errors returns the count of failed operations of kind op (see Ops).
func (s *Redis) Errors(op string) uint64 { return s.errs[opIndex(op)].Load() }

// ctx is an operation's context: ctx's values, the store's timeout.
func (s *Redis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
}

// up reports whether an operation may be sent; when it may not, it counts
// the operation as failed.
func (s *Redis) up(op string) error {
	if time.Now().UnixNano() < s.downUntil.Load() {
		s.fail(op, errDown)
		return errDown
	}
	return nil
}

// fail counts a failed operation and warns, at most once per WarnEvery.
func (s *Redis) fail(op string, err error) {
	s.errs[opIndex(op)].Add(1)
	if !errors.Is(err, errDown) {
		s.downUntil.Store(time.Now().Add(DownFor).UnixNano())
	}
	s.warnMu.Lock()
	s.unwarned++
	now := time.Now()
	if now.Sub(s.lastWarn) < WarnEvery {
		s.warnMu.Unlock()
		return
	}
	n := s.unwarned
	s.unwarned, s.lastWarn = 0, now
	s.warnMu.Unlock()
	s.logger.Warn("shared state: redis failed; going on with this process's own state", "op", op, "error", err.Error(), "failures", n, "next_warning_in", WarnEvery.String())
}

// do runs one operation: refused at once while the store is down, counted
// and warned of when it fails.
func (s *Redis) do(ctx context.Context, op string, f func(ctx context.Context) error) error {
	if err := s.up(op); err != nil {
		return err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	err := f(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		s.fail(op, err)
		return err
	}
	return nil
}

// Lease scripts. Times are the server's (TIME), so replicas' clocks do not
// matter. A lease is a member of one sorted set per bound, scored by when it
// expires; expired members are dropped before counting.
var (
	acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for i, k in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
  local lim = tonumber(ARGV[i + 2])
  if lim > 0 then
    local n = redis.call('ZCARD', k)
    if n >= lim then return {i, n} end
  end
end
for _, k in ipairs(KEYS) do
  redis.call('ZADD', k, now + ttl, ARGV[1])
  redis.call('PEXPIRE', k, ttl)
end
return {0, 0}`)
	renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
for _, k in ipairs(KEYS) do
  redis.call('ZADD', k, now + ttl, ARGV[1])
  redis.call('PEXPIRE', k, ttl)
end
return 0`)
)

// acquire takes a lease on every key within its limit (<= 0: no bound), or
// none: refused is the 1-based index of the key at its limit, n its count.
func (s *Redis) acquire(ctx context.Context, op string, keys []string, limits []int) (release func(), refused, n int, err error) {
	s.leaseMu.Lock()
	s.nextID++
	id := s.nextID
	s.leaseMu.Unlock()
	l := &lease{keys: keys, member: s.replica + ":" + strconv.FormatUint(id, 10)}
	args := []any{l.member, LeaseTTL.Milliseconds()}
	for _, lim := range limits {
		args = append(args, lim)
	}
	var res []int64
	err = s.do(ctx, op, func(ctx context.Context) error {
		var e error
		res, e = acquireScript.Run(ctx, s.client, keys, args...).Int64Slice()
		return e
	})
	if err != nil {
		return nil, 0, 0, err
	}
	if len(res) != 2 {
		return nil, 0, 0, fmt.Errorf("state: unexpected answer %v to a lease", res)
	}
	if res[0] != 0 {
		return nil, int(res[0]), int(res[1]), nil
	}
	s.leaseMu.Lock()
	s.leases[id] = l
	s.leaseMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.leaseMu.Lock()
			_, held := s.leases[id]
			delete(s.leases, id)
			s.leaseMu.Unlock()
			if held {
				s.releaseLease(l)
			}
		})
	}, 0, 0, nil
}

func (s *Redis) releaseLease(l *lease) {
	_ = s.do(context.Background(), "release", func(ctx context.Context) error {
		p := s.client.Pipeline()
		for _, k := range l.keys {
			p.ZRem(ctx, k, l.member)
		}
		_, err := p.Exec(ctx)
		return err
	})
}

// renewLoop renews the process's leases every LeaseTTL/3.
func (s *Redis) renewLoop() {
	defer s.done.Done()
	t := time.NewTicker(LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.renew()
	}
}

// renew renews every lease held, in one pipeline. A lease that expired
// meanwhile (an outage longer than LeaseTTL) is added back: its slot is
// still taken.
func (s *Redis) renew() {
	s.leaseMu.Lock()
	held := make([]*lease, 0, len(s.leases))
	for _, l := range s.leases {
		held = append(held, l)
	}
	s.leaseMu.Unlock()
	if len(held) == 0 {
		return
	}
	_ = s.do(context.Background(), "renew", func(ctx context.Context) error {
		p := s.client.Pipeline()
		for _, l := range held {
			// Eval, not Run: a pipeline cannot fall back from EVALSHA
			// when the server has not cached the script (NOSCRIPT).
			renewScript.Eval(ctx, p, l.keys, l.member, LeaseTTL.Milliseconds())
		}
		_, err := p.Exec(ctx)
		return err
	})
}

// keyPart is one component of a key or channel name: p itself, unless it
// holds '%' or ':', which are escaped as %25 and %3A. Every key is the
// prefix and a fixed word followed by parts joined with ':', so escaping
// makes the map from (word, parts...) to keys injective: an upstream named
// "a:b" and a caller "b" of upstream "a" never share a key (an upstream's
// name may hold ':'). Names without either character, the usual ones (and
// every digest, hash and sealed task id), are their own key part: the
// layout docs/state.md shows.
func keyPart(p string) string {
	if !strings.ContainsAny(p, "%:") {
		return p
	}
	return keyEscaper.Replace(p)
}

var keyEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// Sessions counts a stateful session of caller (a digest, hex) against
// limit fleet-wide: ok is false at the limit, n the count then.
func (s *Redis) Sessions(ctx context.Context, caller string, limit int) (release func(), ok bool, n int, err error) {
	release, refused, n, err := s.acquire(ctx, "session", []string{s.prefix + "sessions:" + keyPart(caller)}, []int{limit})
	return release, err == nil && refused == 0, n, err
}

// A Cancellation is a notifications/cancelled that reached a replica which
// does not hold the call: Caller is the caller's digest (hex), ID the
// request id as the front door keys it.
type Cancellation struct {
	Caller  string `json:"c"`
	ID      string `json:"id"`
	Replica string `json:"r"`
}

// PublishCancel tells the other replicas of a cancellation.
func (s *Redis) PublishCancel(ctx context.Context, c Cancellation) error {
	c.Replica = s.replica
	b, _ := json.Marshal(c)
	return s.do(ctx, "publish", func(ctx context.Context) error {
		return s.client.Publish(ctx, s.prefix+"cancel", b).Err()
	})
}

// OnCancel calls f for every cancellation another replica publishes.
func (s *Redis) OnCancel(f func(Cancellation)) {
	s.subMu.Lock()
	s.subs = append(s.subs, f)
	s.subMu.Unlock()
}

// listen hands the cancellations other replicas publish to OnCancel's
// functions. go-redis resubscribes by itself after a lost connection.
func (s *Redis) listen() {
	defer s.done.Done()
	ch := s.pubsub.Channel(redis.WithChannelHealthCheckInterval(LeaseTTL / 3))
	for m := range ch {
		var c Cancellation
		if json.Unmarshal([]byte(m.Payload), &c) != nil || c.Replica == s.replica || c.Caller == "" || c.ID == "" {
			continue
		}
		s.subMu.Lock()
		subs := s.subs
		s.subMu.Unlock()
		for _, f := range subs {
			f(c)
		}
	}
}
