package playbook

// Succeed makes r the successor of p, the runner of the same engine in the
// gateway r's replaces (a reload): a request whose run p drives — started
// before the reload, its client gone and the run lingering, or succeeded
// within the dedup window — joins that run on p, rather than starting a
// second one here while p's linger, which counts only p's own waiters,
// cancels the first. Everything else is r's. With Options.Shared the store
// does this already (r follows p's run as it would another replica's), and
// p is not asked: its store may be closed once its runs have ended.
//
// p stays usable: the gateway that holds it is retired, not closed, while
// p has runs (gateway.Front), so its client and shared state still serve
// them.
//
// Only one generation is kept: p forgets its own predecessor, so that a
// chain of reloads does not hold every runner there was. Call it before r
// serves any request.
func (r *Runner) Succeed(p *Runner) {
	if p == nil || p == r {
		return
	}
	p.prev.Store(nil)
	r.prev.Store(p)
}
