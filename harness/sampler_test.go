package harness

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSampler(t *testing.T) {
	c := Config{Quick: true, Users: 10, Attackers: 3, ManyUsers: 1000, Simulated: 4 * time.Second}
	s, err := NewSampler(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := []string{"fixed-window", "sliding-log", "sliding-counter", "token-bucket", "leaky-bucket", "gcra"}; !slices.Equal(s.Limiters(), want) {
		t.Errorf("limiters %q, want ratelab's six, %q", s.Limiters(), want)
	}
	if want := []string{"uniform", "bursty", "boundary-attack", "many-users"}; !slices.Equal(s.Workloads(), want) {
		t.Errorf("workloads %q, want %q", s.Workloads(), want)
	}
	ctx := context.Background()
	for _, w := range []string{"uniform", "many-users", "uniform"} { // and back: made again
		for _, l := range []string{"gcra", "sliding-log", "gcra"} {
			x, err := s.Sample(ctx, l, w, 2*time.Millisecond)
			if err != nil {
				t.Fatalf("%s on %s: %v", l, w, err)
			}
			if !(x.ThroughputPerS > 0 && x.P50NS > 0 && x.P90NS >= x.P50NS) {
				t.Errorf("%s on %s: %+v, want a throughput and 0 < p50 <= p90", l, w, x)
			}
			if ns := 1e9 / x.ThroughputPerS; ns > 1e6 {
				t.Errorf("%s on %s: %.0fns a decision, want the time of one, not of the sample", l, w, ns)
			}
			if runtime.GOOS == "linux" && !(x.CPUNS > 0 && x.CPUNS < 1e6) {
				t.Errorf("%s on %s: %.0fns of CPU a decision, want the process's CPU time of one", l, w, x.CPUNS)
			}
		}
		if len(s.live) != 2 || s.workload != w {
			t.Errorf("on %s: %d limiters live on %q, want 2 on %s", w, len(s.live), s.workload, w)
		}
	}
	for _, tt := range []struct {
		limiter, workload string
		d                 time.Duration
		says              string
	}{
		{"gcra", "uniform", 0, "a sample lasts"},
		{"gcra", "uniform", time.Minute, "a sample lasts"},
		{"x/time/rate", "uniform", time.Millisecond, `no limiter "x/time/rate"`},
		{"gcra", "weekends", time.Millisecond, `no workload "weekends"`},
	} {
		if _, err := s.Sample(ctx, tt.limiter, tt.workload, tt.d); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Sample(%s, %s, %v): error %v, want one saying %q", tt.limiter, tt.workload, tt.d, err, tt.says)
		}
	}
}

func TestNewSamplerRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Config
		says string
	}{
		{"a peer only", Config{Quick: true, Limiters: []string{"go-limiter"}}, "times ratelab's limiters"},
		{"an unknown limiter", Config{Quick: true, Limiters: []string{"gcra2"}}, `unknown limiter "gcra2"`},
		{"Redis", Config{Quick: true, Redis: redisConfig{URL: "redis://127.0.0.1:6379/0"}}, "in memory"},
		{"a bad limit", Config{Quick: true, Users: -1}, "must be positive"},
	} {
		if _, err := NewSampler(tt.c); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.says)
		}
	}
}
