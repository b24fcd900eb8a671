package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/results"
	"github.com/ratelab/ratelab/workloads/synthlog"
	"gopkg.in/yaml.v3"
)

// ratelab plan on a gzip log from standard input: the tables, plan.json
// (the lab's results file, which ratelab report reads) and the report.
func TestPlanCommand(t *testing.T) {
	var log bytes.Buffer
	zw := gzip.NewWriter(&log)
	truth, err := synthlog.WriteShop(zw, synthlog.Shop{Users: 1500, Span: 10 * time.Minute, Abusers: 1, Offices: 1})
	if err != nil {
		t.Fatal(err)
	}
	zw.Close()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"plan", "--limits", "2/s..50/s", "--steps", "6", "--spare", "0.2%", "--out", dir}, &log, &stdout, &stderr); err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"If one number a period is all you can set", "Who sends what", "apart from all the rest", "│ sliding-log     │ 14/s  │", "The clients hit hardest", truth.Abusers[0], "Keys that look like many users", truth.Offices[0], "plan.json"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	f, err := results.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, r := range f.Rows {
		if r.Mode != "plan" {
			t.Errorf("a row of mode %q in plan.json", r.Mode)
		}
		if r.Setting("kind") == "point" {
			points++
		}
	}
	if points != 6*6 || f.Meta.Setting("limits") != "2/s..50/s" {
		t.Errorf("plan.json: %d points, limits %q; want 36 (six algorithms at six limits) and 2/s..50/s", points, f.Meta.Setting("limits"))
	}
	for _, name := range []string{"report.html", "charts/plan-refused.png", "charts/plan-peaks.png", "charts/plan-top.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	// ratelab report draws it again, as a lab's run; compare has nothing
	// to gate in it, and says so rather than "no regression".
	stdout.Reset()
	if err := run(context.Background(), []string{"report", "--out", t.TempDir(), filepath.Join(dir, "plan.json")}, nil, &stdout, &stderr); err != nil {
		t.Errorf("report of plan.json: %v", err)
	}
	saved := filepath.Join(dir, "plan.json")
	if err := run(context.Background(), []string{"compare", saved, saved}, nil, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "nothing to compare") {
		t.Errorf("compare of plan.json with itself: %v; want nothing to compare", err)
	}
	// The nginx.conf it wrote, given back as the limit run today, refuses
	// what the policy in nginx does.
	var again bytes.Buffer
	log.Reset()
	zw = gzip.NewWriter(&log)
	synthlog.WriteShop(zw, synthlog.Shop{Users: 1500, Span: 10 * time.Minute, Abusers: 1, Offices: 1})
	zw.Close()
	if err := run(context.Background(), []string{"plan", "--limits", "2/s..50/s", "--steps", "6", "--spare", "0.2%", "--out", t.TempDir(), "--current", filepath.Join(dir, "nginx.conf")}, &log, &again, &stderr); err != nil {
		t.Fatalf("plan --current nginx.conf: %v\n%s", err, stderr.String())
	}
	nginxRow := regexp.MustCompile(`the bucket in nginx +│ rate=\S+ burst=\d+ +│ +(\d+) │ +([\d,]+)`).FindStringSubmatch(out)
	todayRow := regexp.MustCompile(`│ nginx.conf: ratelab_users[^│]*│ +(\d+) │ +([\d,]+)`).FindStringSubmatch(again.String())
	if nginxRow == nil || todayRow == nil || nginxRow[1] != todayRow[1] || nginxRow[2] != todayRow[2] {
		t.Errorf("the policy in nginx refuses %q; its nginx.conf as --current %q\n%s", nginxRow, todayRow, again.String())
	}
}

// A --current that cannot be read fails with the line it could not read.
func TestPlanCurrentBad(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	os.WriteFile(conf, []byte("limit_req_zone $binary_remote_addr zone=one:10m rate=5r/h;\nlimit_req zone=one;\n"), 0o644)
	haCfg := filepath.Join(dir, "haproxy.cfg")
	os.WriteFile(haCfg, []byte("backend t\n    stick-table type ip size 1k expire 20s store http_req_rate(10s)\n    http-request deny if { sc_http_req_rate(0) gt many }\n"), 0o644)
	for _, c := range []struct{ current, want string }{
		{"100/fortnight", "not a rate"},
		{filepath.Join(dir, "missing.conf"), "no such file"},
		{conf, "nginx.conf:1: rate=5r/h"},
		{haCfg, "haproxy.cfg:3:"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"plan", "--out", dir, "--current", c.current, "-"}, strings.NewReader(""), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err, &bytes.Buffer{}) != 2 {
			t.Errorf("plan --current %q: %v; want exit 2 saying %q", c.current, err, c.want)
		}
	}
}

func TestPlanBadInput(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "app.log")
	os.WriteFile(junk, []byte(strings.Repeat("not a log line\n", 200)), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--limits", "10/s..5/s"}, "LOW below HIGH"},
		{[]string{"--limits", "10/s..100/min"}, "one period"},
		{[]string{"--limits", "10/s,5/min"}, "share one period"},
		{[]string{"--limits", "ten/s"}, "--limits"},
		{[]string{"--spare", "2"}, "--spare 2"},
		{[]string{"--refused", "maybe"}, "want count or drop"},
		{[]string{"--algos", "gcra,nope"}, "nope"},
		{[]string{"--emit", "haproxy,envoi"}, `"envoi" is not one of nginx, ratelab, haproxy`},
		{[]string{"--key", "user"}, "want ip, field:NAME"},
		{[]string{"--format", "$remote_addr $status"}, "has no time"},
		{[]string{"--format", "csv", "--key", "field:user"}, "CSV trace's key"},
		{[]string{filepath.Join(dir, "missing.log")}, "no such file"},
		{[]string{junk}, "none of the first 100 lines is a request of the format combined"},
		{[]string{"-"}, "the log holds no request"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"plan", "--out", dir}, c.args...), strings.NewReader(""), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err, &bytes.Buffer{}) != 2 {
			t.Errorf("plan %q: %v; want exit 2 saying %q", c.args, err, c.want)
		}
	}
}

// A sweep runs from LOW to HIGH exactly, log-spaced, rounded to two
// digits between.
func TestSweep(t *testing.T) {
	for _, c := range []struct {
		limits string
		steps  int
		want   string
	}{
		{"1/s..100/s", 10, "1/s 2/s 3/s 5/s 8/s 13/s 22/s 36/s 60/s 100/s"},
		{"1/s..1234/s", 4, "1/s 11/s 120/s 1234/s"},
		{"60/min..6000/min", 3, "60/min 600/min 6000/min"},
		{"10/s,20/s", 10, "10/s 20/s"},
	} {
		got, err := sweep(c.limits, c.steps)
		var s []string
		for _, l := range got {
			s = append(s, l.String())
		}
		if err != nil || strings.Join(s, " ") != c.want {
			t.Errorf("sweep(%q, %d) = %v, %v; want %s", c.limits, c.steps, s, err, c.want)
		}
	}
}

// ratelab plan --shard I/N --summary FILE, then ratelab plan merge: three
// shards (one taking its index from JOB_COMPLETION_INDEX, as a Kubernetes
// Indexed Job's pod does) merged into the plan one pass makes, its first
// paragraph the same but for the share of requests refused, which a merge
// does not decide; and the shards of a cut with one missing, or a shard
// without its summary, refused with a reason.
func TestPlanShardsMerge(t *testing.T) {
	var log bytes.Buffer
	if _, err := synthlog.WriteShop(&log, synthlog.Shop{Users: 500, Span: 10 * time.Minute, Abusers: 2, Offices: 1, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	if err := os.WriteFile(path, log.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	planIn := func(stdin string, args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"plan"}, args...), strings.NewReader(stdin), &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	plan := func(args ...string) (string, error) { return planIn("", args...) }
	one, err := plan("--cores", "1", "--out", filepath.Join(dir, "one"), path)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, one)
	}
	var shards []string
	for i := range 3 {
		s := filepath.Join(dir, fmt.Sprintf("shard-%d.bin", i))
		args := []string{"--shard", fmt.Sprintf("%d/3", i), "--summary", s, path}
		if i == 2 {
			t.Setenv("JOB_COMPLETION_INDEX", "2")
			args[1] = "3"
		}
		if out, err := plan(args...); err != nil || !strings.Contains(out, fmt.Sprintf("Shard %d of 3:", i)) {
			t.Fatalf("plan %q: %v\n%s", args, err, out)
		}
		shards = append(shards, s)
	}
	merged, err := plan(append([]string{"merge", "--out", filepath.Join(dir, "merged")}, shards...)...)
	if err != nil {
		t.Fatalf("plan merge: %v\n%s", err, merged)
	}
	first := func(s string) string {
		p, _, _ := strings.Cut(s, "\n\n")
		return regexp.MustCompile(` \([0-9.]+% of the requests\)`).ReplaceAllString(strings.Join(strings.Fields(p), " "), "")
	}
	if first(merged) != first(one) || !strings.Contains(one, "% of the requests)") {
		t.Errorf("merged:\n%s\none pass:\n%s", first(merged), first(one))
	}
	if flat := strings.Join(strings.Fields(merged), " "); !strings.Contains(flat, "Merged 3 shards") || !strings.Contains(flat, "what it refuses in requests is not decided") {
		t.Errorf("a merged plan that does not say it decided no request:\n%s", merged)
	}
	// Its report's picks too: no "0 requests (0%)" for what was not decided.
	md, err := os.ReadFile(filepath.Join(dir, "merged", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if flat := strings.Join(strings.Fields(string(md)), " "); strings.Contains(flat, "0 requests (0%)") || !strings.Contains(flat, "the requests it refuses are not decided") {
		t.Errorf("the merged plan's report says it decided requests:\n%s", md)
	}
	// The same on several cores of this machine, in one command, from
	// the file or piped in (the log read once), the requests decided
	// too: one pass's first paragraph, word for word, and its limit
	// today's.
	whole := func(s string) string {
		p, _, _ := strings.Cut(s, "\n\n")
		return strings.Join(strings.Fields(p), " ")
	}
	cores, err := plan("--cores", "2", "--out", filepath.Join(dir, "cores"), path)
	if err != nil || whole(cores) != whole(one) || !strings.Contains(strings.Join(strings.Fields(cores), " "), "on 2 cores") {
		t.Errorf("plan --cores 2: %v\n%s\none pass:\n%s", err, whole(cores), whole(one))
	}
	piped, err := planIn(log.String(), "--cores", "3", "--out", filepath.Join(dir, "piped"))
	if err != nil || whole(piped) != whole(one) || !strings.Contains(strings.Join(strings.Fields(piped), " "), "on 3 cores") {
		t.Errorf("plan --cores 3 < log: %v\n%s\none pass:\n%s", err, whole(piped), whole(one))
	}
	today := func(args ...string) string {
		out, err := plan(append(args, "--current", "5/s", "--out", t.TempDir(), path)...)
		if err != nil {
			t.Fatalf("plan %q --current 5/s: %v\n%s", args, err, out)
		}
		return whole(out)
	}
	if a, b := today("--cores", "1"), today("--cores", "2"); a != b || !strings.Contains(a, "Your limit today, 5/s") {
		t.Errorf("--current 5/s on two cores:\n%s\none pass:\n%s", b, a)
	}
	// With fewer requests kept than the log holds (--memory), whom the
	// policy refuses, and that what it refuses in requests is not
	// decided, and why.
	small, err := plan("--cores", "2", "--memory", "1MiB", "--out", filepath.Join(dir, "small"), path)
	if flat := strings.Join(strings.Fields(small), " "); err != nil || first(small) != first(one) || !strings.Contains(flat, "what it refuses in requests is not decided: the log's") {
		t.Errorf("plan --cores 2 --memory 1MiB: %v\n%s", err, small)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{append([]string{"merge"}, shards[:2]...), "shard 2 of 3 is missing"},
		{append([]string{"merge"}, shards[0], shards[0], shards[1]), "twice"},
		{[]string{"merge", path}, "is not a shard"},
		{[]string{"merge", "--limits", "1/s..10/s", shards[0]}, "--limits"},
		{[]string{"--shard", "0/3", path}, "--summary"},
		{[]string{"--cores", "-1", path}, "want 1 to 256"},
		{[]string{"--cores", "2", "--limits", "1/s..10/s", path}, "drop --cores"},
		{[]string{"--memory", "lots", path}, "want a size"},
		{[]string{"--cores", "2", "--shard", "0/2", "--summary", filepath.Join(dir, "x"), path}, "a machine's part"},
		{[]string{"--shard", "3/3", "--summary", filepath.Join(dir, "x"), path}, "want I/N"},
	} {
		out, err := plan(tt.args...)
		if err == nil || !strings.Contains(out+err.Error(), tt.want) {
			t.Errorf("plan %q: %v, want an error saying %q\n%s", tt.args, err, tt.want, out)
		}
	}
}

// The Kubernetes Indexed Job docs/plan gives (shards-job.yaml, then
// merge-job.yaml), checked as a cluster would read it, a batch/v1 Job,
// Indexed, as many pods at once as shards, and its commands run as its
// pods would: each shard with JOB_COMPLETION_INDEX set and $(VAR)
// expanded, its volumes in a directory here, then the merge, whose plan's
// first paragraph is one pass's but for the requests.
func TestPlanShardsJob(t *testing.T) {
	type container struct {
		Command []string `yaml:"command"`
	}
	type job struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int    `yaml:"completions"`
			Parallelism    int    `yaml:"parallelism"`
			Template       struct {
				Spec struct {
					RestartPolicy string      `yaml:"restartPolicy"`
					Containers    []container `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	read := func(name string) job {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "plan", name))
		if err != nil {
			t.Fatal(err)
		}
		var j job
		if err := yaml.Unmarshal(b, &j); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if j.APIVersion != "batch/v1" || j.Kind != "Job" || j.Spec.Template.Spec.RestartPolicy != "Never" || len(j.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: %s %s, restart %q, %d containers: want a batch/v1 Job of one container, never restarted", name, j.APIVersion, j.Kind, j.Spec.Template.Spec.RestartPolicy, len(j.Spec.Template.Spec.Containers))
		}
		return j
	}
	shards, merge := read("shards-job.yaml"), read("merge-job.yaml")
	n := shards.Spec.Completions
	if shards.Spec.CompletionMode != "Indexed" || n < 2 || shards.Spec.Parallelism != n {
		t.Fatalf("shards-job.yaml: %q, %d completions, %d at once: want Indexed, each shard a pod, all at once", shards.Spec.CompletionMode, n, shards.Spec.Parallelism)
	}
	var log bytes.Buffer
	if _, err := synthlog.WriteShop(&log, synthlog.Shop{Users: 500, Span: 10 * time.Minute, Abusers: 2, Offices: 1, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"logs", "summaries"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "logs", "access.log"), log.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// runPod runs a container's command as its pod would: $(VAR) from
	// env, the volumes under dir.
	runPod := func(cmd []string, env map[string]string) string {
		t.Helper()
		if len(cmd) < 3 || cmd[0] != "ratelab" || cmd[1] != "plan" {
			t.Fatalf("command %q: want ratelab plan", cmd)
		}
		var args []string
		for _, a := range cmd[1:] {
			a = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(a, func(v string) string { return env[v[2:len(v)-1]] })
			for _, vol := range []string{"/logs", "/summaries"} {
				if strings.HasPrefix(a, vol+"/") {
					a = filepath.Join(dir, a)
				}
			}
			args = append(args, a)
		}
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, stderr.String())
		}
		return stdout.String()
	}
	for i := range n {
		index := fmt.Sprint(i)
		t.Setenv("JOB_COMPLETION_INDEX", index)
		if out := runPod(shards.Spec.Template.Spec.Containers[0].Command, map[string]string{"JOB_COMPLETION_INDEX": index}); !strings.Contains(out, fmt.Sprintf("Shard %d of %d:", i, n)) {
			t.Errorf("pod %d: %s", i, out)
		}
	}
	merged := runPod(merge.Spec.Template.Spec.Containers[0].Command, nil)
	var one bytes.Buffer
	if err := run(context.Background(), []string{"plan", "--out", filepath.Join(dir, "one"), filepath.Join(dir, "logs", "access.log")}, strings.NewReader(""), &one, &one); err != nil {
		t.Fatal(err)
	}
	first := func(s string) string {
		p, _, _ := strings.Cut(s, "\n\n")
		return regexp.MustCompile(` \([0-9.]+% of the requests\)`).ReplaceAllString(strings.Join(strings.Fields(p), " "), "")
	}
	if !strings.Contains(strings.Join(strings.Fields(merged), " "), fmt.Sprintf("Merged %d shards", n)) || first(merged) != first(one.String()) {
		t.Errorf("the merge Job's plan:\n%s\none pass's:\n%s", merged, first(one.String()))
	}
}

// A plan goes, unasked, to a folder of its log's own: a plan of another
// log, or make plan's out/plan, is not written over.
func TestPlanOut(t *testing.T) {
	for _, tt := range []struct {
		logs []string
		want string
	}{
		{[]string{"access.log"}, "out/plan-access"},
		{[]string{"/var/log/nginx/access.log.gz", "b.log"}, "out/plan-access"},
		{[]string{"shop.2026-11-27.json"}, "out/plan-shop.2026-11-27"},
		{[]string{".hidden"}, "out/plan-.hidden"},
		{[]string{"-"}, "out/plan-stdin"},
		{nil, "out/plan-stdin"},
	} {
		if got := planOut(tt.logs); got != filepath.FromSlash(tt.want) {
			t.Errorf("planOut(%q) = %q, want %q", tt.logs, got, tt.want)
		}
	}
}
