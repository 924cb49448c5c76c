package annotations_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
)

func facts(name, method, path string, ro, destr bool, p annotations.Provenance) annotations.ToolFacts {
	f := false
	return annotations.ToolFacts{
		Name: name, SourceName: name, Method: method, Path: path, OperationID: name, Description: "does things",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro, DestructiveHint: &destr, OpenWorldHint: &f},
		Provenance:  p, Location: "/paths/x", Source: "doc.yaml",
		DescriptionSHA256: strings.Repeat("d", 64), TitleSHA256: strings.Repeat("e", 64),
	}
}

var provMethod = annotations.Provenance{ReadOnly: "method", Destructive: "method", Idempotent: "method", OpenWorld: "default"}

func TestLintRules(t *testing.T) {
	tests := []struct {
		name string
		tool annotations.ToolFacts
		want []string // rule IDs, in order
	}{
		{"clean GET", facts("list_x", "GET", "/x", true, false, provMethod), nil},
		{"GET that writes", facts("get_x", "GET", "/x", false, false, provMethod), []string{"MCPG001"}},
		{"DELETE read-only", facts("remove_x", "DELETE", "/x", true, true, provMethod), []string{"MCPG002", "MCPG005"}},
		{"DELETE not destructive", facts("delete_x", "DELETE", "/x", false, false, provMethod), []string{"MCPG003", "MCPG008"}},
		{"POST read-only by tag", facts("search_x", "POST", "/x/search", true, false,
			annotations.Provenance{ReadOnly: "tag:agent-readonly", OpenWorld: "default"}), []string{"MCPG004"}},
		{"POST read-only declared", facts("search_x", "POST", "/x/search", true, false,
			annotations.Provenance{ReadOnly: "x-mcp-annotations:READONLY_TOOL", OpenWorld: "default"}), nil},
		{"looks destructive", facts("cancel_order", "POST", "/orders/{id}/cancel", false, false, provMethod), []string{"MCPG008"}},
		{"destructive word as a prefix", facts("bulk_deletes", "POST", "/x", false, false, provMethod), []string{"MCPG008"}},
		{"not a destructive word", facts("predelete_check", "POST", "/checks", false, false, provMethod), nil},
		{"camelCase destructive verb last", facts("processDelete", "POST", "/p", false, false, provMethod), []string{"MCPG008"}},
		{"camelCase destructive verb", facts("orderCancel", "POST", "/o", false, false, provMethod), []string{"MCPG008"}},
		{"camelCase, not a destructive word", facts("getPredeleteState", "POST", "/p", false, false, provMethod), nil},
	}
	noDesc := facts("x", "PUT", "/x", false, false, provMethod)
	noDesc.Description = " "
	tests = append(tests, struct {
		name string
		tool annotations.ToolFacts
		want []string
	}{"no description", noDesc, []string{"MCPG006"}})
	mangled := facts("repos_list", "PUT", "/x", false, false, provMethod)
	mangled.Mangled, mangled.SourceName = true, "repos/list"
	tests = append(tests, struct {
		name string
		tool annotations.ToolFacts
		want []string
	}{"mangled", mangled, []string{"MCPG007"}})
	open := facts("put_x", "PUT", "/x", false, false, provMethod)
	tr := true
	open.Annotations.OpenWorldHint = &tr
	tests = append(tests, struct {
		name string
		tool annotations.ToolFacts
		want []string
	}{"undeclared open world", open, []string{"MCPG009"}})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range annotations.Lint([]annotations.ToolFacts{tt.tool}) {
				got = append(got, f.Rule)
				if !strings.HasPrefix(f.Message, tt.tool.Name+": ") || f.Location == "" {
					t.Errorf("finding %+v does not name the tool and location", f)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("rules %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	warn := annotations.NewReport([]annotations.ToolFacts{facts("get_x", "GET", "/x", false, false, provMethod)}, nil)
	for failOn, want := range map[string]int{"": 0, "error": 0, "warning": 1, "never": 0} {
		if got := warn.ExitCode(failOn); got != want {
			t.Errorf("warning finding, --fail-on %q: exit %d, want %d", failOn, got, want)
		}
	}
	clean := []annotations.ToolFacts{facts("list_x", "GET", "/x", true, false, provMethod)}
	lock := annotations.NewLock(clean)
	drifted := annotations.NewReport(append(clean, facts("list_y", "GET", "/y", true, false, provMethod)), lock)
	if drifted.ExitCode("never") != 1 {
		t.Error("a drifted lock must fail whatever --fail-on says")
	}
}

func TestLockRoundTrip(t *testing.T) {
	tools := []annotations.ToolFacts{
		facts("b_tool", "PUT", "/b", false, false, provMethod),
		facts("a_tool", "GET", "/a", true, false, provMethod),
	}
	tools[0].InputSchemaSHA256 = strings.Repeat("ab", 32)
	var buf bytes.Buffer
	if err := annotations.NewLock(tools).Write(&buf); err != nil {
		t.Fatal(err)
	}
	l, err := annotations.ReadLock(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tools) != 2 || l.Tools[0].Name != "a_tool" {
		t.Fatalf("lock not sorted by name: %+v", l.Tools)
	}
	if d := annotations.Compare(l, tools); !d.Empty() {
		t.Errorf("round trip drifted: %+v", d)
	}

	// Every kind of change, and which ones are critical.
	changed := []annotations.ToolFacts{facts("b_tool", "PATCH", "/b", true, true, provMethod)}
	changed[0].InputSchemaSHA256 = strings.Repeat("cd", 32)
	d := annotations.Compare(l, changed)
	if len(d.Removed) != 1 || d.Removed[0] != "a_tool" || len(d.Added) != 0 {
		t.Errorf("added %v removed %v", d.Added, d.Removed)
	}
	critical := map[string]bool{}
	for _, c := range d.Changed {
		critical[c.Field] = c.Critical
	}
	want := map[string]bool{"operation": true, "readOnlyHint": false, "destructiveHint": false, "inputSchema": true}
	for f, c := range want {
		if got, ok := critical[f]; !ok || got != c {
			t.Errorf("%s: changed=%v critical=%v, want critical=%v", f, ok, got, c)
		}
	}
	// Losing readOnly or destructive is critical.
	lost := annotations.Compare(annotations.NewLock(changed), []annotations.ToolFacts{facts("b_tool", "PATCH", "/b", false, false, provMethod)})
	for _, c := range lost.Changed {
		if (c.Field == "readOnlyHint" || c.Field == "destructiveHint") && !c.Critical {
			t.Errorf("%s %s→%s is not critical", c.Field, c.From, c.To)
		}
	}
	if !lost.Drifted("b_tool") || lost.Drifted("other") {
		t.Error("Drifted")
	}
}

func TestReadLockErrors(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `{"version":3,"tools":[]}`, `{"version":1,"tools":[{"name":""}]}`,
		`{"version":1,"tools":[{"name":"a"},{"name":"a"}]}`, `{"version":1,"tools":[],"extra":1}`,
		`{"version":2,"tools":[{"name":"a","inputSchemaSha256":"x"}]}`, // no description or title hash
	} {
		if _, err := annotations.ReadLock(strings.NewReader(in)); err == nil || !strings.HasPrefix(err.Error(), "annotations: lockfile: ") {
			t.Errorf("ReadLock(%s): %v", in, err)
		}
	}
}

func TestReportFormats(t *testing.T) {
	r := annotations.NewReport([]annotations.ToolFacts{facts("delete_x", "DELETE", "/x|y", true, true, provMethod)}, nil)
	for _, format := range []string{"table", "json", "markdown", "sarif"} {
		var buf bytes.Buffer
		if err := r.Write(&buf, format); err != nil || !strings.Contains(buf.String(), "MCPG002") {
			t.Errorf("%s: %v\n%s", format, err, buf.String())
		}
	}
	var buf bytes.Buffer
	r.Write(&buf, "markdown")
	if !strings.Contains(buf.String(), `/x\|y`) {
		t.Errorf("markdown does not escape |: %s", buf.String())
	}
	if err := r.Write(&buf, "xml"); err == nil {
		t.Error("unknown format: want error")
	}
}
