package annotations_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/annotations"
)

// TestDrift: every kind of drift, one line per tool, each tool once; a
// rename (same method and path, or same operationId at a new path) reads as
// a rename; what serve --lock holds back.
func TestDrift(t *testing.T) {
	base := []annotations.ToolFacts{
		facts("get_pet", "GET", "/pets/{id}", true, false, provMethod),
		facts("delete_pet", "DELETE", "/pets/{id}", false, true, provMethod),
		facts("list_pets", "GET", "/pets", true, false, provMethod),
	}
	base[0].InputSchemaSHA256 = strings.Repeat("ab", 32)
	base[1].InputSchemaSHA256 = strings.Repeat("ef", 32)
	lock := annotations.NewLock(base)
	edit := func(f func(ts []annotations.ToolFacts) []annotations.ToolFacts) []annotations.ToolFacts {
		return f(slices.Clone(base))
	}
	tests := []struct {
		name  string
		tools []annotations.ToolFacts
		lines []string
		held  []string
	}{
		{"none", base, nil, nil},
		{"added", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			return append(ts, facts("add_pet", "POST", "/pets", false, false, provMethod))
		}), []string{
			"lock: 1 tools drifted: 1 added, 0 removed, 0 renamed, 0 changed",
			"+ add_pet: not in the lock",
		}, []string{"add_pet"}},
		{"removed", base[1:], []string{
			"lock: 1 tools drifted: 0 added, 1 removed, 0 renamed, 0 changed",
			"- get_pet: in the lock, no longer served",
		}, nil},
		{"two changes to one tool make one line", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[1] = facts("delete_pet", "DELETE", "/pets/{id}", false, false, provMethod)
			ts[1].InputSchemaSHA256 = strings.Repeat("cd", 32)
			return ts
		}), []string{
			"lock: 1 tools drifted: 0 added, 0 removed, 0 renamed, 1 changed",
			"~ delete_pet: destructiveHint true → false [CRITICAL]; inputSchema efefefefefef → cdcdcdcdcdcd [CRITICAL]",
		}, []string{"delete_pet"}},
		{"renamed, same operation", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[0].Name = "fetch_pet"
			return ts
		}), []string{
			"lock: 1 tools drifted: 0 added, 0 removed, 1 renamed, 0 changed",
			"~ renamed get_pet → fetch_pet (same GET /pets/{id})",
		}, []string{"fetch_pet"}},
		{"renamed, same operationId at a new path", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[2].Name, ts[2].Path = "pets_list", "/v2/pets"
			return ts
		}), []string{
			"lock: 1 tools drifted: 0 added, 0 removed, 1 renamed, 0 changed",
			"~ renamed list_pets → pets_list (same operationId list_pets): operation GET /pets → GET /v2/pets [CRITICAL]",
		}, []string{"pets_list"}},
		{"renamed and changed", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[1] = facts("remove_pet", "DELETE", "/pets/{id}", false, false, provMethod)
			ts[1].InputSchemaSHA256 = base[1].InputSchemaSHA256
			return ts
		}), []string{
			"lock: 1 tools drifted: 0 added, 0 removed, 1 renamed, 0 changed",
			"~ renamed delete_pet → remove_pet (same DELETE /pets/{id}): destructiveHint true → false [CRITICAL]",
		}, []string{"remove_pet"}},
		{"a new tool at another operation is no rename", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[2] = facts("search_pets", "POST", "/pets/search", true, false, provMethod)
			return ts
		}), []string{
			"lock: 2 tools drifted: 1 added, 1 removed, 0 renamed, 0 changed",
			"+ search_pets: not in the lock",
			"- list_pets: in the lock, no longer served",
		}, []string{"search_pets"}},
		{"a description changed after review (a rug pull) is critical", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[0].DescriptionSHA256 = strings.Repeat("1", 64)
			return ts
		}), []string{
			"lock: 1 tools drifted: 0 added, 0 removed, 0 renamed, 1 changed",
			"~ get_pet: description dddddddddddd → 111111111111 [CRITICAL]",
		}, []string{"get_pet"}},
		{"so is a title", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[2].TitleSHA256 = strings.Repeat("2", 64)
			return ts
		}), []string{
			"lock: 1 tools drifted: 0 added, 0 removed, 0 renamed, 1 changed",
			"~ list_pets: title eeeeeeeeeeee → 222222222222 [CRITICAL]",
		}, []string{"list_pets"}},
		{"everything at once", edit(func(ts []annotations.ToolFacts) []annotations.ToolFacts {
			ts[0].Name = "fetch_pet"
			ts[1] = facts("delete_pet", "DELETE", "/pets/{id}", true, true, provMethod)
			ts[1].InputSchemaSHA256 = base[1].InputSchemaSHA256
			return append(ts[:2], facts("add_pet", "POST", "/pets", false, false, provMethod))
		}), []string{
			"lock: 4 tools drifted: 1 added, 1 removed, 1 renamed, 1 changed",
			"+ add_pet: not in the lock",
			"- list_pets: in the lock, no longer served",
			"~ renamed get_pet → fetch_pet (same GET /pets/{id})",
			"~ delete_pet: readOnlyHint false → true",
		}, []string{"add_pet", "delete_pet", "fetch_pet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := annotations.Compare(lock, tt.tools)
			var buf bytes.Buffer
			d.WriteText(&buf)
			want := "lock: no drift\n"
			if tt.lines != nil {
				want = strings.Join(tt.lines, "\n") + "\n"
			}
			if buf.String() != want {
				t.Errorf("drift:\n%s\nwant:\n%s", buf.String(), want)
			}
			if held := d.Held(); !slices.Equal(held, tt.held) {
				t.Errorf("held back %v, want %v", held, tt.held)
			}
			for _, n := range tt.held {
				if !d.Drifted(n) {
					t.Errorf("Drifted(%s) = false", n)
				}
			}
			if (tt.lines == nil) != d.Empty() {
				t.Errorf("Empty() = %v", d.Empty())
			}
		})
	}
}

// TestLockVersion1: a lock written before descriptions and titles were
// locked still loads; against it every tool drifts, not critically, with a
// line that says why and what to do, so that serve --lock serves none until
// the lock is written again.
func TestLockVersion1(t *testing.T) {
	v1 := `{"version": 1, "tools": [
  {"name": "get_pet", "method": "GET", "path": "/pets/{id}", "operationId": "get_pet", "readOnlyHint": true,
   "destructiveHint": false, "idempotentHint": false, "openWorldHint": false, "inputSchemaSha256": "` + strings.Repeat("ab", 32) + `"}]}`
	lock, err := annotations.ReadLock(strings.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	now := facts("get_pet", "GET", "/pets/{id}", true, false, provMethod)
	now.InputSchemaSHA256 = strings.Repeat("ab", 32)
	d := annotations.Compare(lock, []annotations.ToolFacts{now})
	var buf bytes.Buffer
	d.WriteText(&buf)
	want := "lock: 1 tools drifted: 0 added, 0 removed, 0 renamed, 1 changed\n" +
		"lock: it records no descriptions or titles (written by an older mcpgate): review them, then write it again (audit --write-lock)\n" +
		"~ get_pet: description not recorded → dddddddddddd; title not recorded → eeeeeeeeeeee\n"
	if buf.String() != want {
		t.Errorf("drift:\n%s\nwant:\n%s", buf.String(), want)
	}
	if !d.Drifted("get_pet") {
		t.Error("a tool whose texts the lock did not record must be held back")
	}
	for _, c := range d.Changed {
		if c.Critical {
			t.Errorf("%s: not recorded is not a critical change", c.Field)
		}
	}
	// Written again, the lock is version 2 and records the texts.
	buf.Reset()
	annotations.NewLock([]annotations.ToolFacts{now}).Write(&buf)
	if !strings.Contains(buf.String(), `"version": 2`) || !strings.Contains(buf.String(), `"descriptionSha256": "dddd`) {
		t.Errorf("lock written:\n%s", buf.String())
	}
}
