package annotations

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// LockVersion is the lockfile format this package writes and reads.
const LockVersion = 1

// Lock records, for review, what each tool may do: its name, the operation it
// calls, its four hints and a hash of its input schema. `mcpgate audit
// --write-lock` writes one; `audit --lock` and `serve --lock` compare the
// current catalog against it.
type Lock struct {
	Version int          `json:"version"`
	Tools   []LockedTool `json:"tools"`
}

// LockedTool is one tool of a Lock.
type LockedTool struct {
	Name              string `json:"name"`
	Method            string `json:"method"`
	Path              string `json:"path"`
	ReadOnly          bool   `json:"readOnlyHint"`
	Destructive       bool   `json:"destructiveHint"`
	Idempotent        bool   `json:"idempotentHint"`
	OpenWorld         bool   `json:"openWorldHint"`
	InputSchemaSHA256 string `json:"inputSchemaSha256"`
}

func lockedTool(t *ToolFacts) LockedTool {
	a := t.Annotations
	return LockedTool{
		Name: t.Name, Method: t.Method, Path: t.Path,
		ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint == nil || *a.DestructiveHint,
		Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint == nil || *a.OpenWorldHint,
		InputSchemaSHA256: t.InputSchemaSHA256,
	}
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

// ReadLock reads a lockfile, refusing unknown fields, another version, and
// duplicate tools.
func ReadLock(r io.Reader) (*Lock, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("annotations: lockfile: %v", err)
	}
	if l.Version != LockVersion {
		return nil, fmt.Errorf("annotations: lockfile: version %d, want %d", l.Version, LockVersion)
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
	// stop warning before it), lost idempotent, gained openWorld, or calls
	// another operation or takes other arguments.
	Critical bool `json:"critical"`
}

// Drift is how a catalog differs from a lock.
type Drift struct {
	Added   []string `json:"added"`   // tools not in the lock
	Removed []string `json:"removed"` // locked tools no longer served
	Changed []Change `json:"changed"`
}

// Compare returns how tools differ from l.
func Compare(l *Lock, tools []ToolFacts) *Drift {
	d := &Drift{Added: []string{}, Removed: []string{}, Changed: []Change{}}
	locked := map[string]LockedTool{}
	for _, t := range l.Tools {
		locked[t.Name] = t
	}
	current := map[string]bool{}
	for i := range tools {
		now := lockedTool(&tools[i])
		current[now.Name] = true
		was, ok := locked[now.Name]
		if !ok {
			d.Added = append(d.Added, now.Name)
			continue
		}
		add := func(field string, from, to any, critical bool) {
			d.Changed = append(d.Changed, Change{Tool: now.Name, Field: field, From: fmt.Sprint(from), To: fmt.Sprint(to), Critical: critical})
		}
		if was.Method != now.Method || was.Path != now.Path {
			add("operation", was.Method+" "+was.Path, now.Method+" "+now.Path, true)
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
	}
	for _, t := range l.Tools {
		if !current[t.Name] {
			d.Removed = append(d.Removed, t.Name)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Removed)
	return d
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// Empty reports whether nothing drifted.
func (d *Drift) Empty() bool {
	return d == nil || len(d.Added)+len(d.Removed)+len(d.Changed) == 0
}

// Drifted reports whether the tool name is new or changed since the lock:
// what `serve --lock` refuses to expose.
func (d *Drift) Drifted(name string) bool {
	if d == nil {
		return false
	}
	return slices.Contains(d.Added, name) || slices.ContainsFunc(d.Changed, func(c Change) bool { return c.Tool == name })
}

// WriteText writes the drift as a readable diff:
//
//   - new_tool                       (not in the lock)
//   - old_tool                       (in the lock, no longer served)
//     ~ abort_process: destructiveHint true → false   [WIDENS]
func (d *Drift) WriteText(w io.Writer) error {
	if d.Empty() {
		_, err := fmt.Fprintln(w, "lock: no drift")
		return err
	}
	fmt.Fprintf(w, "lock: %d added, %d removed, %d changed\n", len(d.Added), len(d.Removed), len(d.Changed))
	for _, n := range d.Added {
		fmt.Fprintf(w, "+ %s (not in the lock)\n", n)
	}
	for _, n := range d.Removed {
		fmt.Fprintf(w, "- %s (in the lock, no longer served)\n", n)
	}
	for _, c := range d.Changed {
		mark := ""
		if c.Critical {
			mark = "   [CRITICAL: review before serving]"
		}
		fmt.Fprintf(w, "~ %s: %s %s → %s%s\n", c.Tool, c.Field, c.From, c.To, mark)
	}
	return nil
}
