package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/mcpgate/mcpgate"

// TestImportsRunOneWay checks the import rules architecture.md states (see
// its Imports section) over every non-test Go file of the module: a rule
// broken here is a layout a reader can no longer trust the folders for.
func TestImportsRunOneWay(t *testing.T) {
	imports := moduleImports(t, "..")
	if len(imports["gateway"]) == 0 || len(imports["gateway/catalog"]) == 0 {
		t.Fatalf("read no imports of gateway or gateway/catalog: %v", imports)
	}
	under := func(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
	for pkg, deps := range imports {
		for _, dep := range deps {
			var why string
			switch {
			case dep == "gateway" && !under(pkg, "cmd") && pkg != "examples/embedded/service":
				why = "only cmd/ and the embedding example import gateway; its subpackages never do"
			case under(dep, "cmd"):
				why = "nothing imports a command"
			case under(dep, "examples") && !under(pkg, "cmd") && !under(pkg, "examples"):
				why = "no product package imports the examples"
			case under(dep, "gateway") && !under(pkg, "gateway") && !under(pkg, "cmd") && !under(pkg, "examples"):
				why = "tagging, annotations, upstream and auth sit below gateway"
			case (pkg == "gateway/catalog" || pkg == "gateway/config") &&
				(dep == "gateway/stdio" || under(dep, "gateway/internal/httpbound") || under(dep, "gateway/internal/sdkwire") || under(dep, "gateway/internal/caller")):
				why = "the catalog and the configuration are pure descriptions: nothing of the HTTP edge or the wire"
			case pkg == "gateway/config" && dep == "gateway/catalog":
				why = "the catalog is built from the configuration, not the other way"
			case slices.Contains([]string{"tagging", "annotations", "auth"}, pkg):
				why = pkg + " imports no package of this module"
			}
			if why != "" {
				t.Errorf("%s imports %s: %s", pkg, dep, why)
			}
		}
	}
}

// moduleImports maps each package of the module under root (by its path
// in the module) to the module's packages its non-test files import.
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			if dep, ok := strings.CutPrefix(p, module+"/"); ok && !slices.Contains(out[pkg], dep) {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
