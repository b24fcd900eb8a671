package redislimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated reports that no replica (or fewer than WithReplicaAck
// asked for) acknowledged a decision's writes within the ack timeout. It
// comes wrapped in ErrUnavailable: the decision follows the failure mode.
var ErrNotReplicated = errors.New("not acknowledged by enough replicas")

// WithReplicaAck makes every decision wait until replicas of the key's
// master (at least one) have acknowledged its writes, or until timeout
// (at least a millisecond; less than the limiter's timeout), with Redis's
// WAIT, sent after the script on the same connection, in the same round
// trip. A decision not acknowledged in time is not trusted: it fails,
// its error wraps ErrNotReplicated and ErrUnavailable, and the failure
// mode answers it.
//
// It is for a fleet that would rather pay latency than over-admit when
// Redis fails over: replication is asynchronous, and a replica promoted
// in place of a master that died lacks the master's last writes, so it
// admits again what those had counted. With the ack, every admission
// the caller sees is on a replica, and a failover to that replica loses
// none. Its cost is a replication round trip a decision, and a failed
// decision while no replica answers (figures in docs/redis.md).
//
// It needs a client that talks to one master (a *redis.Client, or one
// from redis.NewFailoverClient for Sentinel) or a *redis.ClusterClient
// (the WAIT goes to the master of the key's slot); it does not combine
// with batching or leases.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(o *Options) { o.AckReplicas, o.AckTimeout = replicas, timeout }
}

// ack is what WithReplicaAck asks of each decision.
type ack struct {
	replicas int
	timeout  time.Duration
}

// checkAck reports what is wrong with o's ack for client c.
func checkAck(c Client, o Options) error {
	switch {
	case o.AckReplicas == 0 && o.AckTimeout == 0:
		return nil
	case o.AckReplicas < 1 || o.AckTimeout < time.Millisecond || o.AckTimeout >= o.Timeout:
		return fmt.Errorf("an ack from %d replicas within %v: want at least one replica and a timeout from 1ms to less than the limiter's, %v", o.AckReplicas, o.AckTimeout, o.Timeout)
	}
	switch c.(type) {
	case *redis.Ring:
		return errors.New("an ack from replicas needs a client of one master or a Cluster's, not a Ring, whose shards WAIT cannot reach by key")
	case *redis.ClusterClient, redis.Cmdable:
		return nil
	}
	return fmt.Errorf("an ack from replicas needs a go-redis client that pipelines (redis.Cmdable), not a %T", c)
}

// acked runs c's command, then WAIT, in one pipeline on the connection
// of the server that holds c's first key, and returns the command's reply
// once enough replicas acknowledged it.
func (r *runner) acked(ctx context.Context, c *call, s *script) (any, error) {
	p, err := r.master(ctx, c)
	if err != nil {
		return nil, err
	}
	v, acks, err := r.evalWait(ctx, p, c.cmd)
	if noScript(err) {
		r.evals.Add(1)
		v, acks, err = r.evalWait(ctx, p, whole(s, c.cmd))
	}
	switch {
	case err != nil:
		if cc, ok := r.c.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx) // a master may have moved: ask the cluster again
		}
		return nil, err
	case acks < int64(r.ack.replicas):
		return nil, fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, acks, r.ack.replicas, r.ack.timeout)
	}
	return v, nil
}

// master returns what runs c's command and a WAIT on one connection: the
// client itself, or for a Cluster the master of the slot of c's first key.
func (r *runner) master(ctx context.Context, c *call) (redis.Cmdable, error) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return r.c.(redis.Cmdable), nil
	}
	key, _ := c.cmd[3].(fmt.Stringer)
	if key == nil {
		return nil, errors.New("the decision names no key")
	}
	return cc.MasterForKey(ctx, key.String())
}

// evalWait sends args and a WAIT in one pipeline on p, and returns the
// reply to args and the number of replicas that acknowledged.
func (r *runner) evalWait(ctx context.Context, p redis.Cmdable, args []any) (any, int64, error) {
	pipe := p.Pipeline()
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = pipe.Process(ctx, cmd)
	wait := redis.NewIntCmd(ctx, "wait", r.ack.replicas, r.ack.timeout.Milliseconds())
	_ = pipe.Process(ctx, wait)
	_, err := pipe.Exec(ctx)
	if cmd.Err() != nil { // the script's error first: NOSCRIPT is answered
		return nil, 0, cmd.Err()
	}
	if err != nil {
		return nil, 0, err
	}
	return cmd.Val(), wait.Val(), nil
}
