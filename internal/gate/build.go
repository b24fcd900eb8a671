package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// buildFlags are the flags both builds are made with, so that the two
// binaries differ only where their source does: no file paths and no
// version control stamp in either.
var buildFlags = []string{"-trimpath", "-buildvcs=false"}

// ErrNoBase reports a base that cannot be built: not in the repository's
// history (a shallow clone, say), or not a commit.
var ErrNoBase = errors.New("gate: the base cannot be built")

// buildTree builds the package pkg (./cmd/ratelab, say) of the working
// tree at dir, as it is, uncommitted changes and all, into bin. It returns
// the commit the tree is at, "+" after it when the tree has changes, or ""
// when dir is not in a git repository.
func buildTree(ctx context.Context, dir, pkg, bin string) (commit string, err error) {
	if err := goBuild(ctx, dir, pkg, bin); err != nil {
		return "", err
	}
	head, err := git(ctx, dir, "rev-parse", "--short=12", "HEAD")
	if err != nil {
		return "", nil
	}
	if st, err := git(ctx, dir, "status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
		head += "+"
	}
	return head, nil
}

// buildRef builds the package pkg of the module at dir, in a git
// repository, as it is at ref (a commit, a branch, a tag) into bin: it
// checks ref out into a temporary worktree, builds there (in the same
// folder of the repository as dir) and removes the worktree. It returns
// the commit ref names. A ref the repository's history does not have is
// an ErrNoBase that says what to do.
func buildRef(ctx context.Context, dir, ref, pkg, bin string) (commit string, err error) {
	top, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("%w: %s is not in a git repository, so the base %q cannot be checked out: %v", ErrNoBase, dir, ref, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	sub, err := filepath.Rel(top, abs) // where dir is in the repository
	if err != nil || strings.HasPrefix(sub, "..") {
		return "", fmt.Errorf("gate: %s is not inside its repository's top folder %s", dir, top)
	}
	full, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		why := "it is not a commit, branch or tag of this repository"
		if sh, _ := git(ctx, dir, "rev-parse", "--is-shallow-repository"); sh == "true" {
			why = "this clone is shallow and does not have it: fetch the history (git fetch --unshallow, or fetch-depth: 0 in CI)"
		}
		return "", fmt.Errorf("%w: the base %q: %s", ErrNoBase, ref, why)
	}
	tmp, err := os.MkdirTemp("", "ratelab-base-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	git(ctx, dir, "worktree", "prune") // a gate killed before it removed its worktree left it registered
	if _, err := git(ctx, dir, "worktree", "add", "--detach", "--quiet", tree, full); err != nil {
		return "", fmt.Errorf("%w: checking out %s: %v", ErrNoBase, ref, err)
	}
	defer func() {
		if _, rerr := git(context.WithoutCancel(ctx), dir, "worktree", "remove", "--force", tree); rerr != nil && err == nil {
			err = fmt.Errorf("gate: removing the base's worktree: %w", rerr)
		}
	}()
	if err := goBuild(ctx, filepath.Join(tree, sub), pkg, bin); err != nil {
		return "", fmt.Errorf("%w: %s at %.12s: %v", ErrNoBase, ref, full, err)
	}
	return full[:12], nil
}

// moduleDir returns the folder of the Go module the current folder is in,
// where the builds are made.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("gate: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("gate: not in a Go module: run the gate in the module of the ratelab to build, or give both builds as --base-bin and --new-bin")
	}
	return filepath.Dir(mod), nil
}

// goBuild runs go build in dir, saying what the compiler said when it fails.
func goBuild(ctx context.Context, dir, pkg, bin string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	args := append([]string{"build"}, buildFlags...)
	args = append(args, "-o", abs, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// git runs git in dir and returns what it printed, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("git %s: %s", args[0], msg)
		}
		return "", fmt.Errorf("git %s: %w", args[0], err)
	}
	return strings.TrimSpace(out.String()), nil
}
