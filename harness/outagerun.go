package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/ratelab/ratelab/results"
)

// outage runs s with its server taken away as kind says, failing as fail
// says.
func (l *lab) outage(ctx context.Context, s Subject, kind, fail string) (results.Row, error) {
	oc := l.c.Outage
	limit := oc.limit()
	cfg, done, err := s.Outage(limit)
	if err != nil {
		return results.Row{}, err
	}
	defer done()
	if cfg.Redis == nil {
		return results.Row{}, errors.New("the subject names no Redis server")
	}
	away, closeAway, err := takeAway(kind, &cfg)
	if err != nil {
		return results.Row{}, err
	}
	defer closeAway()
	switch fail {
	case "closed":
		cfg.FailClosed = true
	case "fallback":
		cfg.Fallback = oc.Fleet
	}
	lb, err := serveLoopback(ctx, cfg, oc.Rate, oc.Before)
	if err != nil {
		return results.Row{}, err
	}
	defer lb.close()
	return l.attackOutage(ctx, s, kind, fail, lb, away)
}

// attackOutage attacks lb's server, warmed up, taking its Redis away
// through cut and giving it back as the outage config says, and samples
// its count of decisions made without Redis meanwhile.
func (l *lab) attackOutage(ctx context.Context, s Subject, kind, fail string, lb *loopback, cut taker) (results.Row, error) {
	oc := l.c.Outage
	keys := make([]string, oc.Users)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	var mu sync.Mutex
	next := 0
	targeter := func(t *vegeta.Target) error {
		mu.Lock()
		key := keys[next%len(keys)]
		next++
		mu.Unlock()
		t.Method, t.URL, t.Header = http.MethodGet, lb.url, http.Header{keyHeader: []string{key}}
		return nil
	}

	awayFor := max(oc.Away, cut.least())
	total := oc.Before + awayFor + oc.After
	var sent []vegeta.Result
	begin := time.Now()
	sample := sampleFailures(lb.srv.RedisFailures, begin)
	away := time.AfterFunc(oc.Before, cut.away)
	back := time.AfterFunc(oc.Before+awayFor, cut.back)
	defer away.Stop()
	defer back.Stop()
	lb.run(ctx, vegeta.Targeter(targeter), total, "outage", func(res *vegeta.Result) { sent = append(sent, *res) })
	failed := sample()
	if err := ctx.Err(); err != nil {
		return results.Row{}, err
	}
	cutAt, backAt := cut.times()
	switch {
	case cut.err() != nil:
		return results.Row{}, cut.err()
	case kind == outageFailover && !cutAt.IsZero() && backAt.IsZero():
		return results.Row{}, fmt.Errorf("the Sentinels named no new master within %v of the kill", total-oc.Before)
	case cutAt.IsZero() || backAt.IsZero():
		return results.Row{}, errors.New("the attack ended before the server was taken away and given back")
	}
	r := row(s, outageModeName, outageModeName)
	o := outageOf(sent, failed, begin, cutAt, backAt, total)
	o.Kind, o.Failure, o.Rate, o.Users = kind, fail, oc.Rate, oc.Users
	o.Limit, o.Window = oc.limit().N, oc.limit().Per
	if fail == "fallback" {
		o.Fleet = oc.Fleet
	}
	o.row(&r)
	r.Add(results.Decisions, results.UnitCount, float64(len(sent)))
	return r, nil
}

// outageOf counts the answers to sent, in bins of outageBin from begin,
// and before cutAt, from cutAt to backAt, and after; and the failed
// decisions of the server, and when the last came.
func outageOf(sent []vegeta.Result, failed []failure, begin, cutAt, backAt time.Time, total time.Duration) outage {
	o := outage{Bin: outageBin, Away: cutAt.Sub(begin), Back: backAt.Sub(begin)}
	o.Bins = make([]answers, int((total+outageBin-1)/outageBin))
	o.Failed = make([]int64, len(o.Bins))
	for i, f := range failed {
		if i > 0 && f.n != failed[i-1].n {
			o.Failed[min(max(int(f.at/outageBin), 0), len(o.Bins)-1)] += f.n - failed[i-1].n
		}
	}
	o.Recovery = recovery(failed, begin, backAt)
	var lat [3][]time.Duration
	for _, res := range sent {
		span := &o.Before
		i := 0
		switch {
		case res.Timestamp.Before(cutAt):
		case res.Timestamp.Before(backAt):
			span, i = &o.During, 1
		default:
			span, i = &o.After, 2
		}
		bin := &o.Bins[min(max(int(res.Timestamp.Sub(begin)/outageBin), 0), len(o.Bins)-1)]
		for _, a := range []*answers{&span.answers, bin} {
			a.count(res.Code, res.Error)
		}
		if res.Code != 0 {
			lat[i] = append(lat[i], res.Latency)
		}
	}
	o.Before.Latency, o.During.Latency, o.After.Latency = latencyOf(lat[0]), latencyOf(lat[1]), latencyOf(lat[2])
	return o
}

// recovery is how long after backAt the server's decisions stopped failing:
// the last failure before the first outageBin with none (0 if none came
// after backAt); nil if decisions were failing until the end. A failure
// after that quiet stretch (a decision that timed out on a busy machine)
// is not the outage's.
func recovery(failed []failure, begin, backAt time.Time) *time.Duration {
	last := backAt
	for i := 1; i < len(failed); i++ {
		at := begin.Add(failed[i].at)
		if !at.After(backAt) {
			continue
		}
		if failed[i].n != failed[i-1].n {
			last = at
		} else if at.Sub(last) >= outageBin {
			rec := last.Sub(backAt)
			return &rec
		}
	}
	return nil
}

// A failure is how many decisions the server had failed at a time from the
// run's start.
type failure struct {
	at time.Duration
	n  int64
}

// failureSample is how often the outage runs read the server's count of
// failed decisions.
const failureSample = 10 * time.Millisecond

// sampleFailures reads the server's count of failed decisions, count,
// every failureSample from now until the function it returns is called,
// once more then, and returns the counts, timed from begin.
func sampleFailures(count func() int64, begin time.Time) func() []failure {
	stop := make(chan struct{})
	done := make(chan struct{})
	var out []failure
	read := func() { out = append(out, failure{time.Since(begin), count()}) }
	go func() {
		defer close(done)
		t := time.NewTicker(failureSample)
		defer t.Stop()
		for {
			select {
			case <-stop:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() []failure {
		close(stop)
		<-done
		return out
	}
}
