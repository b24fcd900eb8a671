package measures

import (
	"fmt"
	"strings"
	"testing"
)

// The house's rooms hold their measures: no file over 500 lines, no
// function over 80, in every package.
func TestRoomsKeepTheirMeasures(t *testing.T) {
	breaches, err := Check("../..", Rooms)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range breaches {
		t.Errorf("%s: split it by what it does (docs/house.md)", b)
	}
}

// The check fails on a function of 81 lines and a file of 501, and
// passes one of 80 in a file of 500; it names each with its receiver.
func TestCheckFindsBreaches(t *testing.T) {
	fn := func(name string, lines int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "func %s {\n", name)
		for range lines - 2 {
			b.WriteString("\t_ = 0\n")
		}
		b.WriteString("}\n")
		return b.String()
	}
	src := "package p\n\ntype Plan struct{}\n\n" + fn("ok()", 80) + fn("(p *Plan) File()", 81)
	got, err := CheckSource("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].What != "(*Plan).File" || got[0].Lines != 81 || got[0].Where != "p.go:85" {
		t.Errorf("breaches %v; want (*Plan).File of 81 lines at p.go:85 alone", got)
	}
	long := "package p\n" + strings.Repeat("// a line\n", 499)
	if got, _ := CheckSource("q.go", []byte(long)); len(got) != 0 {
		t.Errorf("a file of 500 lines: %v; want none", got)
	}
	if got, _ := CheckSource("q.go", []byte(long+"// one more\n")); len(got) != 1 || got[0].What != "file" || got[0].Lines != 501 {
		t.Errorf("a file of 501 lines: %v; want it named", got)
	}
}

// What plan and probe export is what a library user calls: said here,
// so that a new exported name is a choice, not a slip.
func TestExports(t *testing.T) {
	for _, pkg := range []struct {
		dir  string
		most int
	}{{"../../plan", 32}, {"../../probe", 32}} {
		names, err := Exported(pkg.dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s exports %d: %s", pkg.dir, len(names), strings.Join(names, " "))
		if len(names) > pkg.most {
			t.Errorf("%s exports %d names, more than %d: %s", pkg.dir, len(names), pkg.most, strings.Join(names, " "))
		}
	}
}
