package federation

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// updates records what OnResourceUpdated was given: per update, its URI
// and how many holders it went to.
type updates struct {
	mu  sync.Mutex
	got []string // "<uri> <holders>"
	to  [][]*Subscription
}

func (r *updates) hook(_ context.Context, p *mcp.ResourceUpdatedNotificationParams, to []*Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, p.URI)
	r.to = append(r.to, to)
}

func (r *updates) list() ([]string, [][]*Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got), slices.Clone(r.to)
}

func sameHolders(a, b []*Subscription) bool {
	set := func(l []*Subscription) map[*Subscription]bool {
		m := map[*Subscription]bool{}
		for _, s := range l {
			m[s] = true
		}
		return m
	}
	return len(a) == len(b) && maps.Equal(set(a), set(b))
}

// TestSubscribeCounted: holders of one credential share one upstream
// subscription, another credential's session has its own; an update goes
// to the holders on the session it came on; the upstream is unsubscribed
// when the last holder lets go, once.
func TestSubscribeCounted(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	rec := &updates{}
	u := newUpstream(t, Config{URL: ts.URL}, &Options{OnResourceUpdated: rec.hook})
	ctx := t.Context()
	sub := func(cred Credential) *Subscription {
		t.Helper()
		s, err := u.Subscribe(ctx, cred, "file:///a.txt")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a1, a2, b := sub("Bearer a"), sub("Bearer a"), sub("Bearer b")
	subs, _ := ts.subscriptions()
	slices.Sort(subs)
	if want := []string{"Bearer a file:///a.txt", "Bearer b file:///a.txt"}; !slices.Equal(subs, want) {
		t.Fatalf("upstream subscriptions %q, want %q", subs, want)
	}

	// go-sdk's server sends the update on both sessions.
	if err := ts.mcpServer().ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///a.txt"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two updates", func() bool { got, _ := rec.list(); return len(got) == 2 })
	got, to := rec.list()
	if got[0] != "file:///a.txt" || got[1] != "file:///a.txt" {
		t.Errorf("updates %q", got)
	}
	slices.SortFunc(to, func(x, y []*Subscription) int { return len(x) - len(y) })
	if !sameHolders(to[0], []*Subscription{b}) || !sameHolders(to[1], []*Subscription{a1, a2}) {
		t.Errorf("updates went to %v, want one to b and one to a1 and a2", to)
	}

	if err := a1.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, unsubs := ts.subscriptions(); len(unsubs) != 0 {
		t.Fatalf("unsubscribed %q while a2 holds it", unsubs)
	}
	for range 2 { // the second time does nothing
		if err := a2.Unsubscribe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, unsubs := ts.subscriptions(); !slices.Equal(unsubs, []string{"Bearer a file:///a.txt"}) {
		t.Fatalf("upstream unsubscriptions %q, want Bearer a's, once", unsubs)
	}
	// b's holds; a's session gets no more (nor would they be relayed).
	if err := ts.mcpServer().ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///a.txt"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's update", func() bool { got, _ := rec.list(); return len(got) == 3 })
	if _, to := rec.list(); !sameHolders(to[2], []*Subscription{b}) {
		t.Errorf("the update went to %v, want b", to[2])
	}
	if err := b.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	u.subs.mu.Lock()
	left := len(u.subs.m)
	u.subs.mu.Unlock()
	if left != 0 {
		t.Errorf("%d subscription entries left with no holder", left)
	}
}

// TestResubscribe: an upstream that restarted, forgetting its sessions,
// is subscribed again on the sessions that replace them (the shared one
// and a credential's), found by the health ping; its updates are relayed
// again.
func TestResubscribe(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	rec := &updates{}
	u := newUpstream(t, Config{URL: ts.URL}, &Options{OnResourceUpdated: rec.hook})
	ctx := t.Context()
	for _, cred := range []Credential{"", "Bearer a"} {
		if _, err := u.Subscribe(ctx, cred, "file:///a.txt"); err != nil {
			t.Fatal(err)
		}
	}
	ts.swap(serverOpts{})
	// What the ping loop does every 15s.
	u.probe(ctx) // the shared session is forgotten: dropped
	u.keepSubscribed(ctx)
	eventually(t, "subscribed again", func() bool { subs, _ := ts.subscriptions(); return len(subs) == 4 })
	subs, _ := ts.subscriptions()
	slices.Sort(subs)
	if want := []string{" file:///a.txt", " file:///a.txt", "Bearer a file:///a.txt", "Bearer a file:///a.txt"}; !slices.Equal(subs, want) {
		t.Errorf("upstream subscriptions %q, want %q", subs, want)
	}
	if err := ts.mcpServer().ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///a.txt"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new sessions' updates", func() bool { got, _ := rec.list(); return len(got) == 2 })
}

// TestSubscribedSessionKept: a session that holds subscriptions is not
// closed as idle; one evicted by MaxSessions is opened and subscribed
// again at the next health ping.
func TestSubscribedSessionKept(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL}, &Options{MaxSessions: 1, IdleTimeout: time.Hour})
	ctx := t.Context()
	s, err := u.Subscribe(ctx, "Bearer a", "file:///a.txt")
	if err != nil {
		t.Fatal(err)
	}
	pooled := func() int {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.pool.Len()
	}
	u.sweep(time.Now().Add(2 * time.Hour))
	if n := pooled(); n != 1 {
		t.Fatalf("the idle sweep closed a session that holds a subscription (%d left)", n)
	}
	if _, err := u.CallTool(ctx, "Bearer b", &mcp.CallToolParams{Name: "echo"}, false, nil); err != nil {
		t.Fatal(err) // evicts a's session
	}
	u.keepSubscribed(ctx)
	eventually(t, "subscribed again", func() bool { subs, _ := ts.subscriptions(); return len(subs) == 2 })
	if err := s.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, unsubs := ts.subscriptions(); !slices.Equal(unsubs, []string{"Bearer a file:///a.txt"}) {
		t.Errorf("upstream unsubscriptions %q", unsubs)
	}
	u.sweep(time.Now().Add(2 * time.Hour))
	if n := pooled(); n != 0 {
		t.Errorf("%d sessions left after the sweep, with no subscription", n)
	}
}

// TestStdioResubscribe: a stdio child that crashed and was started again
// is subscribed again by the gateway, and its updates are relayed.
func TestStdioResubscribe(t *testing.T) {
	rec := &updates{}
	u := newUpstream(t, stdioConfig(), &Options{OnResourceUpdated: rec.hook})
	u.backoffMin = 20 * time.Millisecond
	ctx := t.Context()
	if _, err := u.Subscribe(ctx, "", "file:///kid"); err != nil {
		t.Fatal(err)
	}
	subscribed := func() string {
		res, err := u.CallTool(ctx, "", &mcp.CallToolParams{Name: "subscribed"}, true, nil)
		if err != nil {
			return err.Error()
		}
		return text(t, res)
	}
	pid := pidOf(t, u)
	if got := subscribed(); got != "file:///kid" {
		t.Fatalf("the child holds %q", got)
	}
	_, _ = u.CallTool(ctx, "", &mcp.CallToolParams{Name: "crash"}, false, nil)
	eventually(t, "a new child subscribed again", func() bool { return subscribed() == "file:///kid" && pidOf(t, u) != pid })
	if _, err := u.CallTool(ctx, "", &mcp.CallToolParams{Name: "touch"}, false, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new child's update", func() bool { got, _ := rec.list(); return len(got) == 1 })
}

// TestForwardSessionNotSubscribed: a session Forward opens for a caller's
// protocol version is not one that holds subscriptions: it is not
// subscribed, and the credential's own session keeps its one.
func TestForwardSessionNotSubscribed(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL}, nil)
	ctx := t.Context()
	if _, err := u.Subscribe(ctx, "Bearer a", "file:///a.txt"); err != nil {
		t.Fatal(err)
	}
	inits := ts.inits.Load()
	if _, err := u.Forward(ctx, "Bearer a", "2025-06-18", &ForwardParams{Name: "echo"}, nil); err != nil {
		t.Fatal(err)
	}
	if ts.inits.Load() == inits {
		t.Fatal("Forward opened no session of its own: the test proves nothing")
	}
	// A subscription made after it goes to the credential's session too,
	// which holds the URI already: nothing is sent.
	if _, err := u.Subscribe(ctx, "Bearer a", "file:///a.txt"); err != nil {
		t.Fatal(err)
	}
	u.keepSubscribed(ctx)
	if subs, _ := ts.subscriptions(); !slices.Equal(subs, []string{"Bearer a file:///a.txt"}) {
		t.Errorf("upstream subscriptions %q, want the one of Bearer a's session", subs)
	}
}
