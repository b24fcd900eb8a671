package accesslog_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/ratelab/ratelab/workloads/accesslog"
	"github.com/ratelab/ratelab/workloads/synthlog"
)

// BenchmarkRead reads the synthetic shop's log, a line an op, as
// combined and as JSON lines to the millisecond.
func BenchmarkRead(b *testing.B) {
	for _, c := range []struct {
		name string
		s    synthlog.Shop
		o    accesslog.Options
	}{
		{"format=combined", synthlog.Shop{Users: 2000, Span: 10 * time.Minute}, accesslog.Options{}},
		{"format=json", synthlog.Shop{Users: 2000, Span: 10 * time.Minute, Format: "json", Millis: true}, accesslog.Options{Format: accesslog.JSON}},
	} {
		var log bytes.Buffer
		t, err := synthlog.WriteShop(&log, c.s)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			lines := 0
			for b.Loop() {
				r, err := accesslog.NewReader([]accesslog.Input{{Name: "log", R: bytes.NewReader(log.Bytes())}}, c.o)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := r.Read(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
				if n, _ := r.Skipped(); n != 0 || r.Requests() != t.Lines {
					b.Fatalf("%d requests, %d skipped; want the %d lines", r.Requests(), n, t.Lines)
				}
				lines += t.Lines
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(lines), "ns/line")
		})
	}
}
