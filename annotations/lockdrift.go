package annotations

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// LockVersion is the lockfile format this package writes. It reads version 1
// too: locks written before descriptions and titles were locked.
const LockVersion = 2

// Lock records, for review, what each tool may do and what a model reads of
// it: its name, the operation it calls (method, path and operationId), its
// four hints, and hashes of its input schema, description and title. `mcpgate
// audit --write-lock` writes one; `audit --lock` and `serve --lock` compare
// the current catalog against it.
//
// A version 1 lock recorded no description or title: against it, every tool
// drifts ("description: not recorded → …"), and `serve --lock` serves none
// until the lock is written again. A lock vouches for what was reviewed, and
// those texts were not: a description is where a document hides
// instructions for the model, and one changed since the review (a "rug
// pull") must not pass a lock that cannot tell.
type Lock struct {
	Version int          `json:"version"`
	Tools   []LockedTool `json:"tools"`
	// Prompts are the prompts served (see LockedPrompt); a lock written
	// before prompts were locked has none, and every prompt is then new.
	Prompts []LockedPrompt `json:"prompts,omitempty"`
	// Resources are the resources served (see LockedResource); a
	// lock written before resources were locked has none, and every
	// resource is then new.
	Resources []LockedResource `json:"resources,omitempty"`
}

// LockedTool is one tool of a Lock. OperationID lets a rename be told from
// a removal plus an addition when the path changed too; locks written
// before it have none.
type LockedTool struct {
	Name        string `json:"name"`
	Method      string `json:"method"`
	Path        string `json:"path"`
	OperationID string `json:"operationId,omitempty"`
	// Upstream is set for a federated MCP server's tool (no Method, no
	// Path): the upstream it comes from, and OperationID is its name there.
	Upstream          string `json:"upstream,omitempty"`
	ReadOnly          bool   `json:"readOnlyHint"`
	Destructive       bool   `json:"destructiveHint"`
	Idempotent        bool   `json:"idempotentHint"`
	OpenWorld         bool   `json:"openWorldHint"`
	InputSchemaSHA256 string `json:"inputSchemaSha256"`
	// DescriptionSHA256 and TitleSHA256 hash the texts as the document
	// gives them (ToolFacts); empty in a version 1 lock.
	DescriptionSHA256 string `json:"descriptionSha256,omitempty"`
	TitleSHA256       string `json:"titleSha256,omitempty"`
	// OutputSchemaSHA256 hashes the output schema a client is sent (its
	// descriptions, titles and enums are read by the model too); empty for
	// a tool without one.
	OutputSchemaSHA256 string `json:"outputSchemaSha256,omitempty"`
}

func lockedTool(t *ToolFacts) LockedTool {
	a := t.Annotations
	return LockedTool{
		Name: t.Name, Method: t.Method, Path: t.Path, OperationID: t.OperationID, Upstream: federatedFrom(t),
		ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint == nil || *a.DestructiveHint,
		Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint == nil || *a.OpenWorldHint,
		InputSchemaSHA256: t.InputSchemaSHA256,
		DescriptionSHA256: t.DescriptionSHA256, TitleSHA256: t.TitleSHA256,
		OutputSchemaSHA256: t.OutputSchemaSHA256,
	}
}

// federatedFrom is the upstream of a federated tool (one with no HTTP
// operation), "" for any other.
func federatedFrom(t *ToolFacts) string {
	if t.Method == "" && t.Path == "" {
		return t.Upstream
	}
	return ""
}

// NewLock records tools, sorted by name.
func NewLock(tools []ToolFacts) *Lock {
	l := &Lock{Version: LockVersion, Tools: make([]LockedTool, 0, len(tools))}
	for i := range tools {
		l.Tools = append(l.Tools, lockedTool(&tools[i]))
	}
	slices.SortFunc(l.Tools, func(a, b LockedTool) int { return strings.Compare(a.Name, b.Name) })
	return l
}

// ReadLock reads a lockfile, refusing unknown fields, another version than 1
// or 2, duplicate tools, and a version 2 tool without its description and
// title hashes.
func ReadLock(r io.Reader) (*Lock, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("annotations: lockfile: %v", err)
	}
	if l.Version != 1 && l.Version != LockVersion {
		return nil, fmt.Errorf("annotations: lockfile: version %d, want %d (or 1)", l.Version, LockVersion)
	}
	seen := map[string]bool{}
	for _, t := range l.Tools {
		if t.Name == "" {
			return nil, errors.New("annotations: lockfile: a tool has no name")
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("annotations: lockfile: tool %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if l.Version >= 2 && (t.DescriptionSHA256 == "" || t.TitleSHA256 == "") {
			return nil, fmt.Errorf("annotations: lockfile: tool %q has no descriptionSha256 or titleSha256", t.Name)
		}
	}
	if err := l.readPrompts(); err != nil {
		return nil, err
	}
	if err := l.readResources(); err != nil {
		return nil, err
	}
	return &l, nil
}

// Write writes the lock as indented JSON.
func (l *Lock) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(l)
}

// Change is one field of a tool that differs from the lock.
type Change struct {
	Tool  string `json:"tool"`
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Critical marks what a security review must see: the tool lost its
	// readOnly or destructive hint (a client may now auto-approve it, or
	// stop warning before it), lost idempotent, gained openWorld, calls
	// another operation or takes other arguments, or its description or
	// title changed (what the model and the user read, where instructions
	// hide). A text the lock did not record (version 1) is a change, not a
	// critical one.
	Critical bool `json:"critical"`
}

// notRecorded is a Change's From for a text a version 1 lock did not record.
const notRecorded = "not recorded"

// Rename is a locked tool served under a new name: the same operation
// (method and path), or the same operationId at a new path.
type Rename struct {
	From string `json:"from"`
	To   string `json:"to"`
	// By says how the two were matched: "METHOD /path" or "operationId ID".
	By string `json:"by"`
}

// Drift is how a catalog differs from a lock. Each tool appears once: as
// added, removed or renamed, and, when its operation, hints or arguments
// changed, in Changed too (under its current name).
type Drift struct {
	Added   []string `json:"added"`   // tools not in the lock
	Removed []string `json:"removed"` // locked tools no longer served
	Renamed []Rename `json:"renamed"` // locked tools served under a new name
	Changed []Change `json:"changed"` // one entry per field that changed

	// The prompts' drift (ComparePrompts); prompts are never renamed.
	PromptsAdded   []string       `json:"promptsAdded,omitempty"`
	PromptsRemoved []string       `json:"promptsRemoved,omitempty"`
	PromptsChanged []PromptChange `json:"promptsChanged,omitempty"`

	// The resources' drift (CompareResources), by URI or template.
	ResourcesAdded   []string         `json:"resourcesAdded,omitempty"`
	ResourcesRemoved []string         `json:"resourcesRemoved,omitempty"`
	ResourcesChanged []ResourceChange `json:"resourcesChanged,omitempty"`
}

// Compare returns how tools differ from l. A tool whose name is not in the
// lock is matched to a locked tool no longer in the catalog with the same
// method and path, else the same operationId: that is a rename, not an
// addition and a removal.
func Compare(l *Lock, tools []ToolFacts) *Drift {
	d := &Drift{Added: []string{}, Removed: []string{}, Renamed: []Rename{}, Changed: []Change{}}
	locked := map[string]LockedTool{}
	for _, t := range l.Tools {
		locked[t.Name] = t
	}
	current := map[string]bool{}
	var unmatched []LockedTool // current tools whose name is not in the lock
	for i := range tools {
		now := lockedTool(&tools[i])
		current[now.Name] = true
		if was, ok := locked[now.Name]; ok {
			d.compareTool(was, now)
		} else {
			unmatched = append(unmatched, now)
		}
	}
	gone := map[string]LockedTool{} // locked tools whose name is not served
	for _, t := range l.Tools {
		if !current[t.Name] {
			gone[t.Name] = t
		}
	}
	slices.SortFunc(unmatched, func(a, b LockedTool) int { return strings.Compare(a.Name, b.Name) })
	for _, now := range unmatched {
		was, by, ok := renamedFrom(gone, now)
		if !ok {
			d.Added = append(d.Added, now.Name)
			continue
		}
		delete(gone, was.Name)
		d.Renamed = append(d.Renamed, Rename{From: was.Name, To: now.Name, By: by})
		d.compareTool(was, now)
	}
	for name := range gone {
		d.Removed = append(d.Removed, name)
	}
	slices.Sort(d.Removed)
	return d
}

// renamedFrom finds the one locked tool in gone that now is a rename of:
// the same method and path, else the same operationId. Two candidates are
// no match: the drift is then reported as additions and removals.
func renamedFrom(gone map[string]LockedTool, now LockedTool) (LockedTool, string, bool) {
	for _, same := range []func(LockedTool) bool{
		func(t LockedTool) bool { return now.Method != "" && t.Method == now.Method && t.Path == now.Path },
		func(t LockedTool) bool {
			return now.OperationID != "" && t.OperationID == now.OperationID && t.Upstream == now.Upstream
		},
	} {
		var found []LockedTool
		for _, t := range gone {
			if same(t) {
				found = append(found, t)
			}
		}
		if len(found) == 1 {
			by := now.Method + " " + now.Path
			switch {
			case now.Upstream != "":
				by = "tool " + now.OperationID + " of upstream " + now.Upstream
			case found[0].Method != now.Method || found[0].Path != now.Path:
				by = "operationId " + now.OperationID
			}
			return found[0], by, true
		}
	}
	return LockedTool{}, "", false
}

// compareTool records how a tool differs from its locked self, under its
// current name.
func (d *Drift) compareTool(was, now LockedTool) {
	add := func(field string, from, to any, critical bool) {
		d.Changed = append(d.Changed, Change{Tool: now.Name, Field: field, From: fmt.Sprint(from), To: fmt.Sprint(to), Critical: critical})
	}
	if was.Method != now.Method || was.Path != now.Path || was.Upstream != now.Upstream ||
		now.Upstream != "" && was.OperationID != now.OperationID {
		add("operation", lockedOperation(was), lockedOperation(now), true)
	}
	if was.ReadOnly != now.ReadOnly {
		add("readOnlyHint", was.ReadOnly, now.ReadOnly, was.ReadOnly)
	}
	if was.Destructive != now.Destructive {
		add("destructiveHint", was.Destructive, now.Destructive, was.Destructive)
	}
	if was.Idempotent != now.Idempotent {
		add("idempotentHint", was.Idempotent, now.Idempotent, was.Idempotent)
	}
	if was.OpenWorld != now.OpenWorld {
		add("openWorldHint", was.OpenWorld, now.OpenWorld, now.OpenWorld)
	}
	if was.InputSchemaSHA256 != now.InputSchemaSHA256 {
		add("inputSchema", short(was.InputSchemaSHA256), short(now.InputSchemaSHA256), true)
	}
	if was.OutputSchemaSHA256 != now.OutputSchemaSHA256 {
		add("outputSchema", short(was.OutputSchemaSHA256), short(now.OutputSchemaSHA256), true)
	}
	for _, text := range []struct{ field, was, now string }{
		{"description", was.DescriptionSHA256, now.DescriptionSHA256},
		{"title", was.TitleSHA256, now.TitleSHA256},
	} {
		switch {
		case text.was == "" && text.now != "":
			add(text.field, notRecorded, short(text.now), false)
		case text.was != text.now:
			add(text.field, short(text.was), short(text.now), true)
		}
	}
}

// lockedOperation names what a locked tool calls: "METHOD /path", or
// "MCP upstream/name" for a federated tool.
func lockedOperation(t LockedTool) string {
	if t.Upstream != "" {
		return "MCP " + t.Upstream + "/" + t.OperationID
	}
	return t.Method + " " + t.Path
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// Empty reports whether nothing drifted.
func (d *Drift) Empty() bool {
	return d == nil || len(d.Added)+len(d.Removed)+len(d.Renamed)+len(d.Changed)+
		len(d.PromptsAdded)+len(d.PromptsRemoved)+len(d.PromptsChanged)+
		len(d.ResourcesAdded)+len(d.ResourcesRemoved)+len(d.ResourcesChanged) == 0
}

// Held returns the tools `serve --lock` does not serve, sorted: those added,
// renamed (a client's approval of the old name must not carry over unseen)
// or changed since the lock.
func (d *Drift) Held() []string {
	if d == nil {
		return nil
	}
	held := slices.Clone(d.Added)
	for _, r := range d.Renamed {
		held = append(held, r.To)
	}
	for _, c := range d.Changed {
		held = append(held, c.Tool)
	}
	slices.Sort(held)
	return slices.Compact(held)
}

// Drifted reports whether the tool name is one that Held returns.
func (d *Drift) Drifted(name string) bool {
	_, found := slices.BinarySearch(d.Held(), name)
	return found
}

// Tools is the number of tools that drifted, each counted once.
func (d *Drift) Tools() int {
	if d == nil {
		return 0
	}
	return len(d.Held()) + len(d.Removed)
}

// Lines renders the drift one line per tool, each tool once: added (+),
// removed (-), then renamed or changed (~), with every change of a tool on
// its line and the critical ones marked:
//
//   - health: not in the lock
//   - old_tool: in the lock, no longer served
//     ~ renamed get_pet → fetch_pet (same GET /pets/{id})
//     ~ abort_process: destructiveHint true → false [CRITICAL]; inputSchema 1f2e… → 9a8b… [CRITICAL]
//
// `audit --lock` and `serve --lock` both print these lines (see WriteText).
func (d *Drift) Lines() []string {
	if d.Empty() {
		return nil
	}
	changes := map[string][]string{}
	for _, c := range d.Changed {
		s := c.Field + " " + c.From + " → " + c.To
		if c.Critical {
			s += " [CRITICAL]"
		}
		changes[c.Tool] = append(changes[c.Tool], s)
	}
	var lines []string
	for _, n := range d.Added {
		lines = append(lines, "+ "+n+": not in the lock")
	}
	for _, n := range d.Removed {
		lines = append(lines, "- "+n+": in the lock, no longer served")
	}
	renamed := map[string]bool{}
	for _, r := range d.Renamed {
		renamed[r.To] = true
		line := "~ renamed " + r.From + " → " + r.To + " (same " + r.By + ")"
		if cs := changes[r.To]; len(cs) > 0 {
			line += ": " + strings.Join(cs, "; ")
		}
		lines = append(lines, line)
	}
	seen := map[string]bool{}
	for _, c := range d.Changed {
		if renamed[c.Tool] || seen[c.Tool] {
			continue
		}
		seen[c.Tool] = true
		lines = append(lines, "~ "+c.Tool+": "+strings.Join(changes[c.Tool], "; "))
	}
	lines = append(lines, d.promptLines()...)
	return append(lines, d.resourceLines()...)
}

// WriteText writes a summary line, then Lines:
//
//	lock: 3 tools drifted: 1 added, 0 removed, 1 renamed, 1 changed
func (d *Drift) WriteText(w io.Writer) error {
	if d.Empty() {
		_, err := fmt.Fprintln(w, "lock: no drift")
		return err
	}
	if d.Tools() > 0 {
		changed := len(d.Held()) - len(d.Added) - len(d.Renamed) // changed, not renamed
		fmt.Fprintf(w, "lock: %d tools drifted: %d added, %d removed, %d renamed, %d changed\n",
			d.Tools(), len(d.Added), len(d.Removed), len(d.Renamed), changed)
	}
	if held := d.HeldPrompts(); len(held)+len(d.PromptsRemoved) > 0 {
		fmt.Fprintf(w, "lock: %d prompts drifted: %d added, %d removed, %d changed\n",
			len(held)+len(d.PromptsRemoved), len(d.PromptsAdded), len(d.PromptsRemoved), len(held)-len(d.PromptsAdded))
	}
	if held := d.HeldResources(); len(held)+len(d.ResourcesRemoved) > 0 {
		fmt.Fprintf(w, "lock: %d resources drifted: %d added, %d removed, %d changed\n",
			len(held)+len(d.ResourcesRemoved), len(d.ResourcesAdded), len(d.ResourcesRemoved), len(held)-len(d.ResourcesAdded))
	}
	if slices.ContainsFunc(d.Changed, func(c Change) bool { return c.From == notRecorded }) {
		fmt.Fprintln(w, "lock: it records no descriptions or titles (written by an older mcpgate): review them, then write it again (audit --write-lock)")
	}
	for _, l := range d.Lines() {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
