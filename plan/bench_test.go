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
// one shard of two, summed up; and the merge of two shards. Two shards
// at once on two cores, then the merge, is the policy on every core.
func BenchmarkPlan(b *testing.B) {
	var log bytes.Buffer
	if _, err := synthlog.WriteShop(&log, synthlog.Shop{Users: 4000, Span: 20 * time.Minute, Abusers: 4, Offices: 2, Seed: 3}); err != nil {
		b.Fatal(err)
	}
	reader := func() *accesslog.Reader {
		r, err := accesslog.NewReader([]accesslog.Input{{Name: "access.log", R: bytes.NewReader(log.Bytes())}}, accesslog.Options{})
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
}
