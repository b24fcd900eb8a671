// Command modproxy writes a Go module proxy to a folder, from this
// repository's history, for GOPROXY=file://FOLDER: a release of a module
// can then be fetched, checked against go.sum and installed with no
// network, as the Go module proxy would serve it once its tag is pushed.
//
//	modproxy -out DIR MODULE@VERSION=REVISION[:SUBDIR] ...
//
// Each argument names a module, the version to serve it as, the git
// revision (a commit, a tag, HEAD) whose tree holds it, and the folder of
// the repository it is in (none for the repository's root). The zip is
// what the go command would make of that tree (golang.org/x/mod/zip, from
// git archive: the files git tracks, without nested modules), so its
// hash is the one go.sum holds for the release.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "the folder to write the proxy to")
	repo := flag.String("repo", ".", "the git repository")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: modproxy -out DIR MODULE@VERSION=REVISION[:SUBDIR] ...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, arg := range flag.Args() {
		if err := serve(*out, *repo, arg); err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", arg, err)
			os.Exit(1)
		}
	}
}

// serve writes one release into the proxy at out: its .info, .mod and .zip,
// and its version in the module's list.
func serve(out, repo, arg string) error {
	mv, where, ok := strings.Cut(arg, "=")
	mod, version, ok2 := strings.Cut(mv, "@")
	if !ok || !ok2 {
		return fmt.Errorf("want MODULE@VERSION=REVISION[:SUBDIR]")
	}
	rev, subdir, _ := strings.Cut(where, ":")
	m := module.Version{Path: mod, Version: version}
	if err := module.Check(m.Path, m.Version); err != nil {
		return err
	}
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	gomod, err := git(repo, "show", rev+":"+path.Join(subdir, "go.mod"))
	if err != nil {
		return err
	}
	when, err := git(repo, "show", "-s", "--format=%cI", rev)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(when)))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	if err != nil {
		return err
	}
	var z bytes.Buffer
	root, err := git(repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	if err := zip.CreateFromVCS(&z, m, strings.TrimSpace(string(root)), rev, subdir); err != nil {
		return err
	}
	for name, b := range map[string][]byte{version + ".info": info, version + ".mod": gomod, version + ".zip": z.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	list := filepath.Join(dir, "list")
	old, _ := os.ReadFile(list)
	if !strings.Contains("\n"+string(old), "\n"+version+"\n") {
		return os.WriteFile(list, append(old, version+"\n"...), 0o644)
	}
	return nil
}

func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return b, nil
}
