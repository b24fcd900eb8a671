package gate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Pair is what to compare: each build given as a binary, or made from
// source. An empty NewBin is the working tree of the module the gate runs
// in, built; an empty BaseBin is BaseRef of its repository, built.
type Pair struct {
	BaseRef, BaseBin, NewBin string
	// Pkg is the package of the ratelab command in each tree:
	// "./cmd/ratelab" by default.
	Pkg string
}

// builds are the two builds of a Pair, made.
type builds struct {
	Base, New Build
	// BaseBin and NewBin are their binaries.
	BaseBin, NewBin string
	// NoBase, when set, says why there is no base to time against: an
	// ErrNoBase. The new build is made all the same, for what does not
	// need a base.
	NoBase error
}

// Make makes the builds of p that are not given into dir, saying what it
// does to step, if not nil. A base that cannot be built is no error:
// Builds.NoBase says why. A new build that cannot be built is.
func (p Pair) Make(ctx context.Context, dir string, step func(string)) (*builds, error) {
	if step == nil {
		step = func(string) {}
	}
	pkg := p.Pkg
	if pkg == "" {
		pkg = "./cmd/ratelab"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var module string
	if p.NewBin == "" || p.BaseBin == "" {
		if module, err = moduleDir(ctx); err != nil {
			return nil, err
		}
	}
	b := &builds{Base: Build{Label: p.BaseBin}, New: Build{Label: p.NewBin}, BaseBin: p.BaseBin, NewBin: p.NewBin}
	if p.NewBin == "" {
		b.New.Label, b.NewBin = "the working tree", filepath.Join(dir, "ratelab-new")
		step("building the working tree")
		if b.New.Commit, err = buildTree(ctx, module, pkg, b.NewBin); err != nil {
			return nil, fmt.Errorf("gate: the new build: %w", err)
		}
	}
	if p.BaseBin == "" {
		b.Base.Label, b.BaseBin = p.BaseRef, filepath.Join(dir, "ratelab-base")
		step("building the base, " + p.BaseRef)
		b.Base.Commit, b.NoBase = buildRef(ctx, module, p.BaseRef, pkg, b.BaseBin)
	}
	return b, nil
}

// Time starts a worker of each build and times them as plan says, saying
// how far it is to progress, if not nil. A base whose worker will not
// start (one from before the gate, say) is an ErrNoBase, saying so.
func (b *builds) Time(ctx context.Context, plan Plan, progress func(string)) (*AB, error) {
	if b.NoBase != nil {
		return nil, b.NoBase
	}
	if progress != nil {
		progress("starting both builds' workers")
	}
	cur, err := startWorker(ctx, "new", b.NewBin, plan.WorkerArgs)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	base, err := startWorker(ctx, "base", b.BaseBin, plan.WorkerArgs)
	if err != nil {
		if strings.Contains(err.Error(), `unknown command "worker"`) {
			return nil, fmt.Errorf("%w: it predates the A/B gate (its ratelab has no worker command): name a later base (make baseline moves it)", ErrNoBase)
		}
		return nil, fmt.Errorf("%w: %v", ErrNoBase, err)
	}
	defer base.Close()
	f, err := runPair(ctx, base, cur, plan, progress)
	if err != nil {
		return nil, err
	}
	f.Meta.Base, f.Meta.New = withVersion(b.Base, f.Meta.Base), withVersion(b.New, f.Meta.New)
	return f, nil
}

// withVersion is b with the Go version its worker reported.
func withVersion(b, reported Build) Build {
	b.GoVersion = reported.GoVersion
	return b
}
