// Package measures holds the house's measures of its rooms: no source
// file over MaxFileLines lines, no function over MaxFuncLines, in every
// package of the repository: the library, the lab, the plan, the probe,
// the workloads and the command. A room kept to them reads as the lab
// does: a newcomer finds a step by its file's name and reads it whole.
package measures

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The measures.
const (
	MaxFileLines = 500
	MaxFuncLines = 80
)

// Rooms are the folders the measures hold, each with the packages below
// it, from the repository's root.
var Rooms = []string{"limiters", "harness", "results", "plots", "plan", "probe", "products", "workloads", "cmd", "internal", "tools"}

// A Breach is a file or a function past its measure.
type Breach struct {
	Where string // file, or file:line of the function
	What  string // "file" or the function's name
	Lines int
	Limit int
}

func (b Breach) String() string {
	return fmt.Sprintf("%s: %s is %d lines, past %d", b.Where, b.What, b.Lines, b.Limit)
}

// Check reads the Go source files (not tests) below each room of root
// and returns what passes the measures, in order of file.
func Check(root string, rooms []string) ([]Breach, error) {
	var out []Breach
	for _, room := range rooms {
		err := filepath.WalkDir(filepath.Join(root, room), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			found, err := CheckSource(rel, src)
			out = append(out, found...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckSource is Check of one file's source, named name.
func CheckSource(name string, src []byte) ([]Breach, error) {
	var out []Breach
	if n := strings.Count(string(src), "\n"); n > MaxFileLines {
		out = append(out, Breach{Where: name, What: "file", Lines: n, Limit: MaxFileLines})
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		from, to := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := to - from + 1; n > MaxFuncLines {
			out = append(out, Breach{Where: fmt.Sprintf("%s:%d", name, from), What: funcName(fn), Lines: n, Limit: MaxFuncLines})
		}
	}
	return out, nil
}

// funcName is fn's name as a person reads it: (*Plan).File, calibrate.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		t, star = s.X, "*"
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return fmt.Sprintf("(%s%s).%s", star, id.Name, fn.Name.Name)
	}
	return fn.Name.Name
}

// Exported are the exported names a package's source files (not tests)
// in dir declare at the top level: its types, functions, variables and
// constants (not methods, nor fields), sorted.
func Exported(dir string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out = append(out, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out = append(out, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
