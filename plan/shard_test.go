package plan

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"testing"

	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// A log cut into 1, 2 and 7 shards by key, each summed up apart, written
// and read back, and merged, plans as one pass does: the same bucket and
// the keys it refuses, the same windows, shared tier, classes, envelope
// and frontier (its keys), the same verdict but for the share of requests
// refused, which a merged plan leaves undecided (-1). On a mobile API's
// log, whose policy sets its scrapers apart and gives its carrier NATs a
// tier.
func TestShardsMergeAsOnePass(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	if _, err := synthlog.WriteMobile(&log, synthlog.Mobile{Seed: 1, Users: 600, PerNAT: 30}); err != nil {
		t.Fatal(err)
	}
	key, _ := accesslog.ParseKey(".request.remote_ip")
	o := accesslog.Options{Format: accesslog.JSON, Key: key, Agent: ".request.headers.User-Agent", Path: ".request.uri"}
	reader := func() *accesslog.Reader {
		r, err := accesslog.NewReader([]accesslog.Input{{Name: "mobile.json", R: bytes.NewReader(log.Bytes())}}, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	c := Config{Spare: 0.001}
	// One pass decides the limit run today too, as RunOnCores does
	// below: the shards and their merge are given c, without it.
	cc := c
	today, err := ParseCurrent("5/s", nil, "", key)
	if err != nil {
		t.Fatal(err)
	}
	cc.Current = &today
	one, err := Run(context.Background(), reader(), cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !one.Separated || one.Bucket.Clients == 0 {
		t.Fatalf("one pass: %s, separated %v, refusing %d keys: the comparison proves little", one.Bucket.Policy(), one.Separated, one.Bucket.Clients)
	}
	for _, n := range []int{1, 2, 7} {
		var shards []*Shard
		for i := range n {
			s, err := Summarize(context.Background(), reader(), c, i, n, nil)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := s.Write(&b); err != nil {
				t.Fatal(err)
			}
			back, err := ReadShard(&b, "shard")
			if err != nil {
				t.Fatal(err)
			}
			shards = append(shards, back)
		}
		// Read once and summed up on n goroutines, the same shards, to
		// the byte.
		all, err := SummarizeAll(context.Background(), reader(), c, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			var a, b bytes.Buffer
			if err := errors.Join(all[i].Write(&a), shards[i].Write(&b)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("%d shards: SummarizeAll's shard %d (%d keys) differs from Summarize's (%d keys)", n, i, len(all[i].Keys), len(shards[i].Keys))
			}
		}
		slices.Reverse(shards) // any order
		m, err := Merge(c, shards)
		if err != nil {
			t.Fatal(err)
		}
		got, want := m.Bucket, one.Bucket
		got.Refused, want.Refused, got.decidedClients, want.decidedClients = 0, 0, 0, 0
		if got != want || !slices.Equal(m.Caught, one.Caught) || m.Separated != one.Separated || m.SharedTier.Policy != one.SharedTier.Policy || m.SharedTier.Keys != one.SharedTier.Keys {
			t.Errorf("%d shards: %s refusing %q, shared %+v; one pass: %s refusing %q, shared %+v", n, m.Bucket.Policy(), m.Caught, m.SharedTier, one.Bucket.Policy(), one.Caught, one.SharedTier)
		}
		if m.Bucket.Refused != -1 || m.Merged != n {
			t.Errorf("%d shards: %d requests refused, merged from %d: want -1 (undecided), %d", n, m.Bucket.Refused, m.Merged, n)
		}
		mw, ow := m.Windows, one.Windows
		mw.Refused, ow.Refused, mw.decidedClients, ow.decidedClients = 0, 0, 0, 0
		if mw != ow || !slices.Equal(m.WindowsCaught, one.WindowsCaught) {
			t.Errorf("%d shards: windows %+v; one pass: %+v", n, m.Windows, one.Windows)
		}
		if len(m.Classes) != len(one.Classes) || len(m.Envelope) != len(one.Envelope) || len(m.Frontier) != len(one.Frontier) {
			t.Fatalf("%d shards: %d classes, %d envelope points, %d frontier points; one pass %d, %d, %d", n, len(m.Classes), len(m.Envelope), len(m.Frontier), len(one.Classes), len(one.Envelope), len(one.Frontier))
		}
		for i := range m.Classes {
			if a, b := m.Classes[i], one.Classes[i]; a.Shape() != b.Shape() || a.Key != b.Key || a.Keys != b.Keys || a.Requests != b.Requests {
				t.Errorf("%d shards: class %d %q of %d keys, %d requests; one pass %q, %d, %d", n, i, a.Shape(), a.Keys, a.Requests, b.Shape(), b.Keys, b.Requests)
			}
		}
		for i := range m.Envelope {
			if m.Envelope[i] != one.Envelope[i] {
				t.Errorf("%d shards: envelope %+v; one pass %+v", n, m.Envelope[i], one.Envelope[i])
			}
		}
		for i := range m.Frontier {
			a, b := m.Frontier[i], one.Frontier[i]
			a.Refused, b.Refused, a.decidedClients, b.decidedClients = 0, 0, 0, 0
			if a != b {
				t.Errorf("%d shards: frontier %+v; one pass %+v", n, a, b)
			}
		}
		if m.Clients != one.Clients || m.Requests != one.Requests || m.Lines != one.Lines || m.Span != one.Span || len(m.Shared) != len(one.Shared) {
			t.Errorf("%d shards: %d clients, %d requests, %d lines, %v, %d shared; one pass %d, %d, %d, %v, %d", n, m.Clients, m.Requests, m.Lines, m.Span, len(m.Shared), one.Clients, one.Requests, one.Lines, one.Span, len(one.Shared))
		}
		coresAsOnePass(t, n, one, reader(), cc)
	}
}

// coresAsOnePass holds a plan on n cores of r equal to one pass's, the
// requests decided too: the bucket, the frontier's points, the windows in
// each form and in nginx's, and the limit run today, request for request
// (each decided over the keys the curves say it may refuse, the shards'
// requests merged in time order).
func coresAsOnePass(t *testing.T, n int, one *Plan, r *accesslog.Reader, c Config) {
	t.Helper()
	p, err := RunOnCores(context.Background(), r, c, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Bucket != one.Bucket || p.Merged != 0 || p.Cores != n || p.Undecided != "" || p.Verdict() != one.Verdict() {
		t.Errorf("on %d cores: %+v, merged %d, cores %d %q; one pass: %+v", n, p.Bucket, p.Merged, p.Cores, p.Undecided, one.Bucket)
	}
	if !slices.Equal(p.Frontier, one.Frontier) || p.Windows != one.Windows || p.NginxPolicy != one.NginxPolicy {
		t.Errorf("on %d cores: frontier, windows %+v or nginx %+v differ from one pass's %+v, %+v", n, p.Windows, p.NginxPolicy, one.Windows, one.NginxPolicy)
	}
	for i := range one.WindowsOthers {
		if i >= len(p.WindowsOthers) || *p.WindowsOthers[i] != *one.WindowsOthers[i] {
			t.Errorf("on %d cores: the windows' other forms differ from one pass's", n)
			break
		}
	}
	if a, b := p.Current, one.Current; a == nil || b == nil || a.Refused != b.Refused || a.Clients != b.Clients || !slices.Equal(a.Caught, b.Caught) || b.Refused == 0 {
		t.Errorf("on %d cores: today's limit %+v; one pass %+v (want it to refuse some)", n, a, b)
	}
}

// shardOf is FNV-1a, as hash/fnv computes it, and allocates nothing: it
// runs on every line of every shard.
func TestShardOf(t *testing.T) {
	for _, key := range []string{"", "203.0.0.1", "a key with spaces", "ключ"} {
		h := fnv.New64a()
		h.Write([]byte(key))
		if got, want := shardOf(key, 7), int(h.Sum64()%7); got != want {
			t.Errorf("shardOf(%q, 7) = %d, want %d", key, got, want)
		}
	}
	var sum int
	if n := testing.AllocsPerRun(100, func() { sum += shardOf("203.0.0.1", 8) }); n != 0 || sum < 0 {
		t.Errorf("%v allocations a call, want 0", n)
	}
}
