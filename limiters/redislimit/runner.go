package redislimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelab/ratelab/limiters/composite"
)

// ErrUnavailable reports that Redis did not answer a call: it is down,
// slow past the timeout, answered something unexpected, or the circuit
// breaker is open. A decision's failure mode says what the Decision
// returned with it is.
var ErrUnavailable = errors.New("redislimit: Redis did not answer")

// runner sends every call a Limiter makes to Redis: decisions, peeks and
// settles (scripts), and Reset's, ResetAll's and Walk's commands. Each is
// bounded by the timeout, goes through the circuit breaker, is counted,
// and on failure is reported to the error hook as an error wrapping
// ErrUnavailable.
type runner struct {
	c       Client
	timeout time.Duration
	// guard is whether calls run on a goroutine of their own, raced
	// against the timeout: the client does not honour context deadlines.
	guard bool
	// light is whether a call's deadline may come from a timer kept with
	// the call (call.timed), not a context of its own: the client
	// honours deadlines and its pool gives up waiting for a connection
	// within the timeout.
	light   bool
	batch   *batcher // WithBatching; nil otherwise
	breaker *breaker // WithBreaker; nil otherwise
	ack     *ack     // WithReplicaAck; nil otherwise
	hook    func(error)

	// scripts counts the scripts sent alone, evals the times one had to
	// be sent whole (NOSCRIPT), and others the other commands' round
	// trips. (The denial cache counts nothing: a counter written by every
	// core on a hot key cost more than the rest of its decision.)
	scripts, evals, others atomic.Int64
}

func newRunner(c Client, o Options) *runner {
	honours, pool := deadlines(c)
	r := &runner{c: c, timeout: o.Timeout, guard: !honours, light: honours && pool > 0 && pool <= o.Timeout, hook: o.OnError}
	if o.BreakerFailures > 0 {
		r.breaker = newBreaker(o.BreakerFailures, o.BreakerCool)
	}
	if o.AckReplicas > 0 {
		r.ack = &ack{replicas: o.AckReplicas, timeout: o.AckTimeout}
	}
	return r
}

// Counts are what a Limiter has sent to Redis. The decisions it made
// without a round trip (the denial cache's, the leases') are the caller's
// count less Sent.
type Counts struct {
	// RoundTrips are the calls to Redis: one a script sent alone, one a
	// batch (WithBatching), one more each time a script had to be sent
	// whole, and one each command of Reset, ResetAll and Walk.
	RoundTrips int64
	// Sent is how many scripts (decisions, peeks, settles) went to Redis,
	// alone or in batches.
	Sent int64
}

func (r *runner) counts() Counts {
	c := Counts{RoundTrips: r.scripts.Load() + r.evals.Load() + r.others.Load(), Sent: r.scripts.Load()}
	if r.batch != nil {
		c.RoundTrips += r.batch.batches.Load()
		c.Sent += r.batch.decisions.Load()
	}
	return c
}

// script runs c's command, a script of s, batched if batched is set and
// the Limiter batches, and reads its reply with read (an error of read's
// is a reply not understood). what names the call in errors.
func (r *runner) script(ctx context.Context, what string, c *call, s *script, batched bool, read func(v any) error) error {
	probe, err := r.enter()
	if err == nil {
		var v any
		reuse := !r.guard // else the goroutine of a call given up on still holds c
		switch {
		case !batched || r.batch == nil:
			v, err = r.single(ctx, c, s)
		case ctx.Err() != nil: // the caller is gone: nothing to queue
			err = ctx.Err()
		default:
			var queued bool
			if queued, err = r.batch.enqueue(c.batched(r.timeout)); queued {
				v, err, reuse = c.wait(ctx, r.guard, r.timeout)
			} else if err == nil { // the queue is full: decide alone
				v, err = r.single(ctx, c, s)
			}
		}
		if reuse {
			c.release()
		}
		if err == nil {
			err = read(v)
		}
		r.leave(ctx, probe, err)
	}
	if err != nil {
		return r.failed(what, err)
	}
	return nil
}

// do runs f, one command of Reset, ResetAll or Walk, bounded by the
// timeout and through the breaker.
func (r *runner) do(ctx context.Context, what string, f func(context.Context) error) error {
	probe, err := r.enter()
	if err == nil {
		r.others.Add(1)
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		err = bounded(cctx, r.guard, f)
		cancel()
		r.leave(ctx, probe, err)
	}
	if err != nil {
		return r.failed(what, err)
	}
	return nil
}

// enter asks the breaker whether a call may go to Redis, and whether it
// is the probe of a half-open breaker.
func (r *runner) enter() (probe bool, err error) {
	if r.breaker == nil {
		return false, nil
	}
	ok, probe := r.breaker.enter()
	if !ok {
		return false, ErrBreakerOpen
	}
	return probe, nil
}

// leave tells the breaker how a call that went to Redis ended.
func (r *runner) leave(ctx context.Context, probe bool, err error) {
	switch {
	case r.breaker == nil:
	case err == nil:
		r.breaker.leave(probe, decided)
	case ctx.Err() != nil:
		r.breaker.leave(probe, withdrew)
	default:
		r.breaker.leave(probe, failed)
	}
}

// failed returns err, why Redis did not answer the call what, wrapped,
// and tells the hook.
func (r *runner) failed(what string, err error) error {
	err = fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	if r.hook != nil {
		r.hook(err)
	}
	return err
}

// single runs c's command on its own, bounded by the timeout: a context
// with a timer of the call's own, kept from call to call, where the
// client honours deadlines; else context.WithTimeout's.
func (r *runner) single(ctx context.Context, c *call, s *script) (v any, err error) {
	r.scripts.Add(1)
	if r.light {
		c.ctx = c.timed(ctx, r.timeout)
		v, err = r.send(&c.ctx, c, s)
		c.ctx.stop()
		return v, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.send(ctx, c, s)
}

// send runs c's command, through guarded when the client ignores context
// deadlines.
func (r *runner) send(ctx context.Context, c *call, s *script) (any, error) {
	if !r.guard {
		return r.one(ctx, c, s)
	}
	// The results come back on a channel, never through variables the
	// goroutine might still write after the deadline.
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := r.one(ctx, c, s)
		done <- result{v, err}
	}()
	select {
	case res := <-done:
		return res.v, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// one runs c's command: a decision acknowledged by replicas when the
// Limiter asks for that (WithReplicaAck), else the script alone.
func (r *runner) one(ctx context.Context, c *call, s *script) (any, error) {
	if c.ack && r.ack != nil {
		return r.acked(ctx, c, s)
	}
	return r.eval(ctx, r.c, &c.cmd1, s, c.cmd)
}

// processor runs a command: a client, or a server of a cluster.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// eval runs args (EVALSHA sha numkeys keys... argv...) in cmd, and once
// more as EVAL of s's source when the server does not have the script:
// the one place a lone script falls back (a pipeline's calls fall back
// in batch.go, with whole).
func (r *runner) eval(ctx context.Context, p processor, cmd *redis.Cmd, s *script, args []any) (any, error) {
	*cmd = *redis.NewCmd(ctx, args...) // in the call: no allocation
	cmd.SetFirstKeyPos(3)
	err := p.Process(ctx, cmd)
	if noScript(err) {
		r.evals.Add(1)
		*cmd = *redis.NewCmd(ctx, whole(s, args)...)
		cmd.SetFirstKeyPos(3)
		err = p.Process(ctx, cmd)
	}
	v := cmd.Val()
	*cmd = redis.Cmd{}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// noScript reports whether err is a server's refusal of an EVALSHA of a
// script it does not have.
func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// whole returns args, an EVALSHA of s, as the EVAL of s's source.
func whole(s *script, args []any) []any { return append([]any{"eval", s.src}, args[2:]...) }

// bounded runs f. When guard is set (the client does not honour context
// deadlines) f runs on a goroutine of its own and bounded stops waiting
// for it when ctx is done; the goroutine ends when the client's own
// timeouts end the call. (Configure the client with ContextTimeoutEnabled
// to save the goroutine: about a microsecond a call.)
func bounded(ctx context.Context, guard bool, f func(context.Context) error) error {
	if !guard {
		return f(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call is what one script call needs: its command (EVALSHA, the SHA, the
// key count, at most MaxLimits keys, then a settle's seven ARGV and three
// a limit, the most any script takes, and a hash field) and its context;
// batched, its deadline and the way its answer comes back. Unless a call
// may outlive its caller (guard, or a batched call given up on), calls
// come from a pool.
type call struct {
	args  [3 + composite.MaxLimits + 7 + 3*composite.MaxLimits + 1]any
	keys  [composite.MaxLimits]keyArg
	field keyArg // the key, packed (WithPacking)
	ctx   deadlineCtx
	timer *deadlineTimer // for ctx; nil until the first call, or once fired
	cmd1  redis.Cmd      // the command, alone
	cmd   []any          // the command, in args
	ack   bool           // a decision, which replicas acknowledge (WithReplicaAck)

	deadline time.Time // when the caller stops waiting, batched
	v        any       // the answer: the script's reply,
	err      error     // or why there is none
	done     chan struct{}
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func newCall() *call { return calls.Get().(*call) }

// release returns c to the pool.
func (c *call) release() {
	clear(c.cmd)
	c.cmd, c.ack = nil, false
	calls.Put(c)
}

// keyArg is a key built in a call's own buffer, which go-redis writes as
// bytes (keyArg is an encoding.BinaryMarshaler): a string would cost an
// allocation, and its boxing another.
type keyArg struct{ b []byte }

func (k *keyArg) MarshalBinary() ([]byte, error) { return k.b, nil }

// String is the key, for Cluster and Ring, which hash it.
func (k *keyArg) String() string { return string(k.b) }

// batched readies c to be queued.
func (c *call) batched(timeout time.Duration) *call {
	c.deadline = time.Now().Add(timeout)
	return c
}

// answer gives c its answer (on the sender's goroutine).
func (c *call) answer(v any, err error) {
	c.v, c.err = v, err
	c.done <- struct{}{}
}

// wait waits for c's answer, or for ctx to end. Where the client honours
// deadlines, the sender answers every call by its deadline, and no timer
// is needed; where it does not (guard), the wait has a timer of its own.
// reuse is false when the wait gave up: the sender still holds c.
func (c *call) wait(ctx context.Context, guard bool, timeout time.Duration) (v any, err error, reuse bool) {
	var expired <-chan time.Time
	if guard {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-c.done:
		v, err = c.v, c.err
		c.v, c.err = nil, nil
		return v, err, true
	case <-ctx.Done():
		return nil, ctx.Err(), false
	case <-expired:
		return nil, context.DeadlineExceeded, false
	}
}

// deadlines reports whether c gives up when a context's deadline passes,
// and how long its pool waits for a free connection. A go-redis client
// honours deadlines only with ContextTimeoutEnabled; without it a call
// waits for the client's own dial, read and write timeouts (seconds, by
// default) whatever the context says.
func deadlines(c Client) (honours bool, pool time.Duration) {
	switch c := c.(type) {
	case interface{ Options() *redis.Options }:
		return c.Options().ContextTimeoutEnabled, c.Options().PoolTimeout
	case interface{ Options() *redis.ClusterOptions }:
		return c.Options().ContextTimeoutEnabled, c.Options().PoolTimeout
	case interface{ Options() *redis.RingOptions }:
		return c.Options().ContextTimeoutEnabled, c.Options().PoolTimeout
	}
	return false, 0
}

// deadlineCtx is a context whose deadline is the earlier of its
// parent's and d, and whose Done channel is closed once d passes, by a
// timer kept with a pooled call and reused from call to call, so that a
// call allocates no context: context.WithTimeout costs five allocations.
// Its Done is the timer's alone: a caller that gives up (an HTTP
// request whose client went away) is seen by Err, which go-redis reads
// before it sends, and otherwise waits for the timeout at most, where a
// channel that merged the two would cost a goroutine or an allocation a
// call (context.WithTimeout's five: 435 B against 51 for a decision with
// a request's context, benchstat, 6 runs). go-redis needs the channel, not only
// the deadline: a call that dials waits for its pool's dial, retries
// included, unless Done closes (1.3-1.7s, where the timeout was 250ms,
// against a failover client whose master had just been killed).
type deadlineCtx struct {
	context.Context
	d time.Time
	t *deadlineTimer
}

// A deadlineTimer closes ch when it fires; it fires at most once. A
// call keeps it while it has not fired.
type deadlineTimer struct {
	ch chan struct{}
	t  *time.Timer
}

// timed returns the context of a call from ctx, due after timeout, on
// c's timer.
func (c *call) timed(ctx context.Context, timeout time.Duration) deadlineCtx {
	if c.timer == nil || c.timer.ch == nil {
		ch := make(chan struct{})
		c.timer = &deadlineTimer{ch: ch, t: time.AfterFunc(timeout, func() { close(ch) })}
	} else {
		c.timer.t.Reset(timeout)
	}
	return deadlineCtx{Context: ctx, d: time.Now().Add(timeout), t: c.timer}
}

// stop stops the call's timer; the call drops a timer that fired, whose
// channel is closed.
func (c *deadlineCtx) stop() {
	if c.t != nil && !c.t.t.Stop() {
		c.t.ch = nil // fired: this one is spent
	}
	*c = deadlineCtx{}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.d) {
		return d, true
	}
	return c.d, true
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.t.ch }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.t.ch:
		return context.DeadlineExceeded
	default:
		return c.Context.Err()
	}
}
