package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/ratelab/ratelab/limiters"
	"github.com/ratelab/ratelab/limiters/redistest"
)

// redis_rate, read as N per W, admits a burst of N for a fresh key, then
// denies until a token is back, keeps keys apart, and writes them under
// "rate:" and the prefix it is given. It needs a Redis server (REDIS_ADDR,
// else 127.0.0.1:6379; make test provides one).
func TestRedisRate(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t, nil)
	var nonce [8]byte
	rand.Read(nonce[:])
	prefix := "ratelab:test:" + hex.EncodeToString(nonce[:]) + ":"
	l, err := NewRedisRate(c, prefix, limiters.Limit{N: 5, Per: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Del(ctx, RedisRatePrefix+prefix+"alice", RedisRatePrefix+prefix+"bob")
	for _, key := range []string{"alice", "bob"} {
		for i := range 5 {
			d, err := l.AllowN(ctx, key, 1)
			if err != nil || !d.Allowed || d.Limit != 5 || d.Remaining != 4-i || d.RetryAfter != 0 {
				t.Fatalf("%s request %d: %+v, %v; want admitted, %d remaining", key, i+1, d, err, 4-i)
			}
		}
		d, err := l.AllowN(ctx, key, 1)
		if err != nil || d.Allowed || d.RetryAfter <= time.Second || d.RetryAfter > 2*time.Second {
			t.Fatalf("%s request 6: %+v, %v; want denied for about 2s (a token every 2s)", key, d, err)
		}
		if n, err := c.Exists(ctx, RedisRatePrefix+prefix+key).Result(); err != nil || n != 1 {
			t.Errorf("%s's key is not %s%s%s: %d, %v", key, RedisRatePrefix, prefix, key, n, err)
		}
	}
	if l, err := NewRedisRate(c, prefix, limiters.Limit{}); err == nil || l != nil {
		t.Errorf("redis_rate accepted an empty window: %v, %v", l, err)
	}
}
