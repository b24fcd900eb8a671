package plan

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/nginxtest"
	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/products"
	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// The bucket is decided as nginx keeps it, rounded or not (nginx's clock
// of milliseconds refuses other requests than the plan's bucket where the
// log's times are finer), and the windows as two buckets; a plan that
// decides nothing keeps the bucket's figures.
func TestNginxDecided(t *testing.T) {
	for _, tt := range []struct {
		rate    limiters.Limit
		rounded bool
	}{{limiters.Limit{N: 1, Per: 7 * time.Second}, true}, {limiters.Limit{N: 1, Per: 2 * time.Second}, false}} {
		p := &Plan{Bucket: FrontierPoint{Rate: tt.rate, Burst: 10, Clients: 3, Refused: 30},
			Windows: WindowPair{Short: limiters.Limit{N: 20, Per: time.Second}, Long: limiters.Limit{N: 300, Per: time.Minute}}}
		var asked [][]products.NginxRule
		p.nginxPolicy(func(rs ...products.NginxRule) (int64, int64) {
			asked = append(asked, rs)
			return 31 + int64(len(asked)), 4
		})
		n := p.NginxPolicy
		if len(asked) != 2 || len(asked[0]) != 1 || asked[0][0] != n.Bucket || n.Bucket.Rounded != tt.rounded || n.Clients != 4 || n.Refused != 32 {
			t.Errorf("%s: decided %v, policy %+v: want the bucket as nginx keeps it decided, its 4 clients and 32 requests", tt.rate, asked, n)
		}
		if len(asked) == 2 && (len(asked[1]) != 2 || asked[1][0] != n.Short || n.PairRefused != 33 || n.Short.Meant() != p.Windows.Short) {
			t.Errorf("%s: the windows decided as %v, policy %+v", tt.rate, asked[1], n)
		}
		p.NginxPolicy, p.Merged = NginxPolicy{}, 2
		p.nginxPolicy(func(rs ...products.NginxRule) (int64, int64) {
			if len(rs) == 1 {
				t.Errorf("%s: a merged plan's bucket decided", tt.rate)
			}
			return -1, -1
		})
		if n := p.NginxPolicy; n.Clients != 3 || n.Refused != 30 {
			t.Errorf("%s: merged, policy %+v: want the plan's bucket's 3 clients and 30 requests", tt.rate, n)
		}
	}
}

// The plan's nginx configuration, for each kind of key: nginx reads it
// (nginx -t, where nginx is installed), each zone is keyed as the plan
// was, the burst is the bucket's less one, and the map sends every key
// that looks like many users to a zone of its own. The Go the plan writes
// builds (go vet), and the two windows' buckets are decided.
func TestEmitted(t *testing.T) {
	t.Parallel() // seconds each under the race detector, and none shares a thing
	var log bytes.Buffer
	truth, err := synthlog.WriteMobile(&log, synthlog.Mobile{Seed: 1, Users: 600, PerNAT: 30})
	if err != nil {
		t.Fatal(err)
	}
	o := accesslog.Options{Format: "caddy"}
	var rates []limiters.Limit
	for _, r := range DefaultRates {
		if perSecond(r) >= 0.1 && perSecond(r) <= 20 {
			rates = append(rates, r)
		}
	}
	p := planOf(t, log.Bytes(), o, Config{Limits: []limiters.Limit{limiters.PerSecond(10)}, Rates: rates, Spare: 0.001, Algorithms: []limiters.Algorithm{limiters.SlidingLog}})
	n := p.NginxPolicy
	t.Logf("bucket %s as %s burst=%d; windows %s, %s as %+v, %+v: %d clients, %d requests (the windows: %d, %d)",
		p.Bucket.Policy(), n.Bucket.Rate, n.Bucket.Burst, p.Windows.Short, p.Windows.Long, n.Short, n.Long, n.PairClients, n.PairRefused, p.Windows.Clients, p.Windows.Refused)
	if n.Bucket.Burst != int(p.Bucket.Burst)-1 || n.Short.Burst != p.Windows.Short.N-1 || n.Long.Burst != p.Windows.Long.N-1 {
		t.Errorf("bursts %d, %d, %d: want the bucket's %d and the windows' %d and %d, less one", n.Bucket.Burst, n.Short.Burst, n.Long.Burst, p.Bucket.Burst, p.Windows.Short.N, p.Windows.Long.N)
	}
	// Two buckets admit what the two windows do and more: they refuse
	// no client the windows spare, and some the windows refuse.
	if n.PairClients > p.Windows.Clients || n.PairClients == 0 || n.PairRefused > p.Windows.Refused {
		t.Errorf("the windows as buckets refuse %d clients, %d requests; the windows %d, %d", n.PairClients, n.PairRefused, p.Windows.Clients, p.Windows.Refused)
	}
	for _, tt := range []struct {
		key, zone string
	}{
		{"ip", "$binary_remote_addr"},
		{"header:X-Api-Key", "$http_x_api_key"},
		{"ip+path:2", "$binary_remote_addr$ratelab_route"},
		{".user.id", "$http_user_id"},
	} {
		key, err := accesslog.ParseKey(tt.key)
		if err != nil {
			t.Fatal(err)
		}
		conf := p.Nginx(key, "mobile.json")
		for _, want := range []string{
			fmt.Sprintf("default %s;", tt.zone),
			fmt.Sprintf("zone=ratelab_users:1m rate=%s;", n.Bucket.Rate),
			fmt.Sprintf("limit_req zone=ratelab_users burst=%d nodelay;", p.Bucket.Burst-1),
			fmt.Sprintf("limit_req zone=ratelab_shared burst=%d nodelay;", p.SharedTier.Policy.Burst-1),
			"limit_req_status 429;",
		} {
			if !strings.Contains(conf, want) {
				t.Errorf("--key %s: no %q in\n%s", tt.key, want, conf)
			}
		}
		for _, k := range truth.Shared {
			if !strings.Contains(conf, fmt.Sprintf("%q 1;", k)) {
				t.Errorf("--key %s: the shared key %s is not sent to its zone:\n%s", tt.key, k, conf)
			}
		}
		nginxReads(t, conf)
		nginxReads(t, p.NginxWindows(key, "mobile.json"))
	}
	goBuilds(t, p.Go("mobile.json"))
}

// nginxReads checks that nginx reads conf, its first part in the http
// block and its limit_req lines in a location (nginx -t), where nginx is
// installed.
func nginxReads(t *testing.T, conf string) {
	t.Helper()
	bin := nginxtest.Binary(t)
	if bin == "" {
		t.Log("nginx is not installed: the configuration is not read")
		return
	}
	httpPart, location, _ := strings.Cut(conf, "# In the server or location:")
	dir := t.TempDir()
	full := fmt.Sprintf("pid %[1]s/nginx.pid;\nevents {}\nhttp {\n%[4]s%[2]s\nserver {\nlisten 127.0.0.1:1;\nlocation / {\n%[3]s\n}\n}\n}\n", dir, httpPart, location, nginxtest.Temps(dir))
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-q", "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log")).CombinedOutput(); err != nil {
		t.Errorf("nginx -t: %v\n%s\n%s", err, out, full)
	}
}

// goBuilds checks that the Go the plan writes builds in a program of its
// own beside this package (go vet).
func goBuilds(t *testing.T, snippet string) {
	t.Helper()
	if _, err := os.Stat("testdata"); err != nil {
		if err := os.Mkdir("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove("testdata") })
	}
	dir, err := os.MkdirTemp("testdata", "emitted-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	imports := []string{"github.com/ratelab/ratelab/limiters"}
	for _, pkg := range []string{"gcra", "tiers", "composite"} {
		if strings.Contains(snippet, pkg+".") {
			imports = append(imports, "github.com/ratelab/ratelab/limiters/"+pkg)
		}
	}
	if strings.Contains(snippet, "time.") {
		imports = append(imports, "time")
	}
	src := "package main\n\nimport (\n\t\"" + strings.Join(imports, "\"\n\t\"") + "\"\n)\n\nfunc main() {\n" + snippet +
		"\n_, _, _ = limiter, windows, err\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "vet", "./"+dir).CombinedOutput(); err != nil {
		t.Errorf("go vet of the Go the plan writes: %v\n%s\n%s", err, out, src)
	}
}

// Where the steady pollers need a tier of their own, nginx.conf sends
// them to a zone of theirs through one map of each tier's keys, and reads
// back (--current) as the plan's tiers: a poller under the pollers' zone,
// a key that looks like many users under the shared one, any other under
// the bucket's.
func TestNginxPollersTier(t *testing.T) {
	p := &Plan{Clients: 100,
		Bucket:     FrontierPoint{Rate: limiters.Limit{N: 1, Per: 2 * time.Second}, Burst: 30},
		SharedTier: Tier{Scale: 4, Policy: limiters.Limit{N: 2, Per: time.Second, Burst: 120}, Keys: 1, Share: 0.05},
		Shared:     []Client{{Key: "172.0.0.1"}},
		PollerTier: Tier{Scale: 2, Policy: limiters.Limit{N: 1, Per: time.Second, Burst: 60}, Keys: 2, Share: 0.1},
		Pollers:    []Client{{Key: "198.18.0.1"}, {Key: "198.18.0.2"}},
		Windows:    WindowPair{Short: limiters.Limit{N: 20, Per: time.Second}, Long: limiters.Limit{N: 300, Per: time.Minute}}}
	p.nginxPolicy(func(...products.NginxRule) (int64, int64) { return 0, 0 })
	key, _ := accesslog.ParseKey("ip")
	conf := p.Nginx(key, "access.log")
	for _, want := range []string{"zone=ratelab_pollers:1m rate=1r/s", "limit_req zone=ratelab_pollers burst=59 nodelay;", "\"198.18.0.2\" pollers;", "\"172.0.0.1\" shared;", "steady pollers"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q:\n%s", want, conf)
		}
	}
	cur, err := ParseCurrent("nginx.conf", []byte(conf), "nginx.conf", key)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"198.18.0.1": "rate=1r/s burst=59", "172.0.0.1": "rate=2r/s burst=119", "203.0.113.9": "rate=30r/m burst=29"} {
		if rs := cur.read.RulesOf(k); len(rs) != 1 || rs[0].String() != want {
			t.Errorf("%s is under %v; want %s\n%s", k, rs, want, conf)
		}
	}
	if cur.product != (products.Nginx{}) || len(cur.read.Tiers) != 2 || cur.read.Tiers[1].Name != "ratelab_pollers" {
		t.Errorf("read back as %v: %+v; want nginx's, the pollers' zone a tier", cur.product, cur.read.Tiers)
	}
	if tf := string(p.TierFile("access.log")); !strings.Contains(tf, "pollers: [1/s burst 60]") || !strings.Contains(tf, "\"198.18.0.1\": pollers") {
		t.Errorf("the tier file lacks the pollers' tier:\n%s", tf)
	}
	nginxReads(t, conf)
	goBuilds(t, p.Go("access.log"))
}
