package eventdoc_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/obs/eventdoc"
)

// root is the repository's root; obsDir the catalogue's package.
func dirs() (root, obsDir string) {
	_, file, _, _ := runtime.Caller(0)
	obsDir = filepath.Dir(filepath.Dir(file))
	return filepath.Join(obsDir, "..", "..", ".."), obsDir
}

var _ = Describe("the event catalogue", Label("unit"), func() {
	It("lists every type with a Kind method, and documents each kind, its writer and every field", func() {
		_, obsDir := dirs()
		Expect(eventdoc.Check(obsDir)).To(Succeed())
	})

	It("is what docs/events.md says (EVENTS_DOC_UPDATE=1 or go generate ./internal/runtime/obs rewrites it)", func() {
		root, obsDir := dirs()
		want, err := eventdoc.Markdown(obsDir)
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(root, "docs", "events.md")
		if os.Getenv("EVENTS_DOC_UPDATE") != "" {
			Expect(os.WriteFile(path, want, 0o644)).To(Succeed())
		}
		got, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(got)).To(Equal(string(want)), "docs/events.md is stale: run go generate ./internal/runtime/obs")
	})

	It("has every kind a writer records, and no writer hands the recorder a map", func() {
		root, _ := dirs()
		known := map[string]bool{}
		types := map[string]bool{}
		for _, k := range obs.Kinds() {
			known[k.Kind], types[k.Type.Name()] = true, true
		}
		var calls int
		var problems []string
		fset := token.NewFileSet()
		Expect(filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() {
				if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "docs" || d.Name() == "vendor" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Emit" && sel.Sel.Name != "Event" && sel.Sel.Name != "Record" {
					return true
				}
				at := fset.Position(call.Pos())
				where := rel + ":" + strconv.Itoa(at.Line)
				for i, a := range call.Args {
					switch a := a.(type) {
					case *ast.BasicLit: // a kind as a string
						kind, _ := strconv.Unquote(a.Value)
						if sel.Sel.Name == "Record" { // the lab's typed Record; tracer.Record takes strings
							continue
						}
						if i == 0 && a.Kind == token.STRING && !known[kind] {
							problems = append(problems, where+": kind "+kind+" is not in the catalogue")
						}
						calls++
					case *ast.CompositeLit:
						if _, ok := a.Type.(*ast.MapType); ok {
							problems = append(problems, where+": a map passed to "+sel.Sel.Name)
						}
						if s, ok := a.Type.(*ast.SelectorExpr); ok && isIdent(s.X, "obs") {
							calls++
							if !types[s.Sel.Name] {
								problems = append(problems, where+": obs."+s.Sel.Name+" is not in the catalogue")
							}
						}
					}
				}
				return true
			})
			return nil
		})).To(Succeed())
		Expect(problems).To(BeEmpty())
		Expect(calls).To(BeNumerically(">", 60), "the scan found the writers' calls")
	})
})

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
