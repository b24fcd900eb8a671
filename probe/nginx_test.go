package probe

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratelab/ratelab/internal/nginxtest"
)

// nginxConf is the test's own nginx: three limits, each behind a location
// of its own, in front of a static file (nginx's return directive answers
// before limit_req runs, and would limit nothing).
const nginxConf = `http {
	access_log off;
%[4]s	limit_req_zone $http_x_user zone=burst:1m rate=10r/s;
	limit_req_zone $http_x_user zone=noburst:1m rate=10r/s;
	limit_req_zone $binary_remote_addr zone=byip:1m rate=10r/s;
	limit_req_zone $http_x_user zone=slow:1m rate=60r/m;
	limit_req_zone $http_x_user zone=default:1m rate=10r/s;
	limit_req_zone $http_x_user zone=queue:1m rate=5r/s;
	limit_req_zone $http_x_user zone=w1:1m rate=5r/s;
	limit_req_zone $http_x_user zone=w2:1m rate=40r/m;
	limit_req_zone $http_x_user zone=delay:1m rate=10r/s;
	limit_conn_zone $http_x_user zone=conn:1m;
	server {
		listen 127.0.0.1:%[2]d;
		root %[1]s/www;
		location /burst/ { limit_req zone=burst burst=5 nodelay; limit_req_status 429; }
		location /noburst/ { limit_req zone=noburst; limit_req_status 429; }
		location /ip/ { limit_req zone=byip burst=5 nodelay; limit_req_status 429; }
		location /slow/ { limit_req zone=slow; limit_req_status 429; }
		# As most configurations leave it: no limit_req_status, so
		# nginx refuses with its default, 503.
		location /default/ { limit_req zone=default burst=5 nodelay; }
		# nginx's own example, no nodelay: 1 at once, 10 held and let go
		# one every 200ms; and two stages, 9 at once, 4 held.
		location /queue/ { limit_req zone=queue burst=10; limit_req_status 429; }
		location /delay/ { limit_req zone=delay burst=12 delay=8; limit_req_status 429; }
		# Two zones on one location, as ratelab plan writes two windows:
		# a bucket of 5/s, 5 at once, and one of 40 a minute, 40 at once.
		location /two/ { limit_req zone=w1 burst=4 nodelay; limit_req zone=w2 burst=39 nodelay; limit_req_status 429; }
		# Four requests in flight per user, in front of an upstream that
		# takes 150ms (the test's own): refused with limit_conn's default
		# status, 503.
		location /conn/ { limit_conn conn 4; proxy_pass http://%[3]s; }
	}
}
`

// startNginx starts nginx (nginxtest) with the configuration above,
// /conn/ proxied to upstream (host:port), and returns its base URL.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	return nginxtest.Start(t, func(dir string, port int) string {
		return fmt.Sprintf(nginxConf, dir, port, upstream, nginxtest.Temps(dir))
	}, "burst/index.html", "noburst/index.html", "ip/index.html", "slow/index.html", "default/index.html", "queue/index.html", "delay/index.html", "two/index.html")
}

// nginx's limit_req, probed with no policy: with burst=5 nodelay it is
// GCRA at its rate with a capacity of six, without burst a capacity of
// one, and so at 60r/m (a request a second: probed as such, not as a
// minute), and keyed by the client's address through --key source. nginx
// advertises no wait, and does not limit requests whose key is empty.
// Left without limit_req_status, nginx refuses with 503: the probe learns
// it and names the limiter all the same.
func TestProbeNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("probes nginx for about 30 seconds")
	}
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(150 * time.Millisecond)
	}))
	t.Cleanup(slow.Close)
	base := startNginx(t, slow.Listener.Addr().String())
	for _, tt := range []struct {
		name    string
		path    string
		key     Key
		want    string
		keyless string
		refusal int
		second  string // a second limit, looked for a minute
	}{
		{"burst=5 nodelay", "/burst/", byUser, "gcra 10/s burst 6", "not limited", 429, ""},
		{"no burst", "/noburst/", byUser, "gcra 10/s burst 1", "not limited", 429, ""},
		{"60r/m", "/slow/", byUser, "gcra 1/s burst 1", "not limited", 429, ""},
		{"by address", "/ip/", Key{Kind: "source"}, "gcra 10/s burst 6", "not asked: every request has an address", 429, ""},
		{"default status", "/default/", byUser, "gcra 10/s burst 6", "not limited", 503, ""},
		{"limit_conn 4", "/conn/", byUser, "in-flight 4 at once, per key", "not limited", 503, ""},
		{"burst=10, no nodelay", "/queue/", byUser, "gcra 5/s burst 1 queue 10", "not limited", 429, ""},
		{"burst=12 delay=8", "/delay/", byUser, "gcra 10/s burst 9 queue 4", "not limited", 429, ""},
		{"two zones", "/two/", byUser, "gcra 5/s burst 5", "not limited", 429, "gcra 40/min burst 40"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := Target{URL: base + tt.path, Key: tt.key}
			if tt.key.Kind == "source" {
				src, _, err := ParseSources("", target.URL)
				if err != nil {
					t.Fatal(err)
				}
				target.Sources = src
			}
			most := 2 * time.Minute
			if tt.second != "" {
				looking.Store(target.URL, time.Minute)
				most = 3 * time.Minute
			}
			probeChecked(t, target, most, func(t testing.TB, r *Report) {
				if tt.second != "" {
					twoNamed(t, r, tt.want, tt.second)
					return
				}
				named(t, r, tt.want, time.Minute)
				if r.Refusal.Status != tt.refusal || r.Undecided != 0 {
					t.Errorf("%s, %d undecided: want refusals of %d, none undecided", r.Refusal, r.Undecided, tt.refusal)
				}
				if r.Concurrency.OverAdmits() || !r.Keys.Isolated || r.Keys.Keyless != tt.keyless {
					t.Errorf("concurrency %+v, keys %+v: want no over-admission, isolated, keyless %q", r.Concurrency, r.Keys, tt.keyless)
				}
				if tt.path == "/conn/" {
					return // a limit in flight: the rate's checks are not asked
				}
				if r.RetryAfter[0].Header != "" || len(r.Headers.OnRefused) != 0 || r.Remaining.Verdict != "not advertised" {
					t.Errorf("Retry-After %+v, fields on refusal %v, remaining %+v: nginx sends none", r.RetryAfter, r.Headers.OnRefused, r.Remaining)
				}
				for _, acc := range r.Accuracy {
					if acc.FalseAllows != 0 || acc.MostOverPromise > 1 {
						t.Errorf("%+v: a bucket judged against its own promise keeps it", acc)
					}
				}
			})
		})
	}
}
