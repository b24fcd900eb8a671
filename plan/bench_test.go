package plan

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// BenchmarkPlan is what a plan costs a line, beside the parse floor, on
// the synthetic shop's log (4,000 users, 20 minutes): the log read and
// its clients counted (the floor); the policy in one pass (no sweep);
// one shard of two, summed up; the merge of two shards; the policy on
// two cores from summaries (the log parsed on both, two shards summed up
// at once, merged); and the plan on two cores as ratelab plan makes it
// by default, the requests the policy refuses decided too, in wall time
// a line.
func BenchmarkPlan(b *testing.B) {
	var log bytes.Buffer
	if _, err := synthlog.WriteShop(&log, synthlog.Shop{Users: 4000, Span: 20 * time.Minute, Abusers: 4, Offices: 2, Seed: 3}); err != nil {
		b.Fatal(err)
	}
	reader := func(parsers ...int) *accesslog.Reader {
		o := accesslog.Options{}
		if len(parsers) > 0 {
			o.Parsers = parsers[0]
		}
		r, err := accesslog.NewReader([]accesslog.Input{{Name: "access.log", R: bytes.NewReader(log.Bytes())}}, o)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	var c Config
	lines := func(b *testing.B, per int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(per*b.N), "ns/line")
	}
	n := 0
	b.Run("step=parse-floor", func(b *testing.B) {
		for b.Loop() {
			r, cs := reader(), newClients(int64(time.Second))
			for {
				e, err := r.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				cs.see(&e, true)
			}
			n = r.Lines()
		}
		lines(b, n)
	})
	b.Run("step=policy", func(b *testing.B) {
		for b.Loop() {
			if _, err := Run(context.Background(), reader(), c, nil); err != nil {
				b.Fatal(err)
			}
		}
		lines(b, n)
	})
	var shards []*Shard
	b.Run("step=shard-of-2", func(b *testing.B) {
		for b.Loop() {
			shards = shards[:0]
			for i := range 2 {
				s, err := Summarize(context.Background(), reader(), c, i, 2, nil)
				if err != nil {
					b.Fatal(err)
				}
				shards = append(shards, s)
			}
		}
		lines(b, 2*n) // each of the two read every line
	})
	b.Run("step=merge-of-2", func(b *testing.B) {
		for b.Loop() {
			if _, err := Merge(c, shards); err != nil {
				b.Fatal(err)
			}
		}
		lines(b, n)
	})
	b.Run("step=cores-2", func(b *testing.B) {
		for b.Loop() {
			all, err := SummarizeAll(context.Background(), reader(2), c, 2, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Merge(c, all); err != nil {
				b.Fatal(err)
			}
		}
		lines(b, n)
	})
	b.Run("step=default-2", func(b *testing.B) {
		for b.Loop() {
			if _, err := RunOnCores(context.Background(), reader(2), c, 2, nil); err != nil {
				b.Fatal(err)
			}
		}
		lines(b, n)
	})
}
