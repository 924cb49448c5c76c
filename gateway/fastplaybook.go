package gateway

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// servePlaybook answers a stateless tools/call of a playbook tool on the
// fast path: what playbookHandler does for go-sdk, without go-sdk. The
// fast path takes only calls with no progress token (sdkHandsOff), so there
// is no progress to send and nothing for go-sdk's session to carry; a
// task-augmented call (params.task) never gets here (the task door answers
// it first). The run goes on under the POST's context, which the front door
// keeps for the POST and registers for notifications/cancelled (cancel.go):
// a client that hangs up leaves the run (cancelled upstream after the
// runner's linger), one that sends notifications/cancelled cancels it at
// once, as on go-sdk's path. Through go-sdk the same call cost about twice
// the CPU the NoETL-compatible endpoint spends on it, 322 KB against 25 KB
// allocated (go-sdk's decoder: docs/performance.md, every mode).
func (f *fastPath) servePlaybook(w http.ResponseWriter, r *http.Request, id []byte, t *Tool, req *mcp.CallToolRequest) bool {
	g := f.g
	ctx := g.callTrace(r.Context(), t, r.Header)
	holdFastCost(ctx)
	args, cred, err := g.startPlaybookCall(ctx, t, req, req.Params.Arguments)
	if err != nil {
		res := &mcp.CallToolResult{}
		res.SetError(err)
		f.writeCallResult(w, id, res)
		return true
	}
	pb := t.Playbook
	out := g.runners[t.Upstream].Run(ctx, playbook.Request{Tool: t.Tool.Name, Path: pb.Path, Workload: pb.Workload(args), Cred: cred, Caller: g.callerID(req), Cancelled: cancelledOf(ctx)})
	g.logRun(ctx, t, out)
	f.writeCallResult(w, id, out.Result)
	return true
}
