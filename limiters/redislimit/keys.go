package redislimit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ratelab/ratelab/limiters"
)

// suffix is the end of the Redis key of limit lim under algorithm a: the
// algorithm and the limit, N/W for a window, C@T for a bucket (W and T in
// nanoseconds).
func suffix(a limiters.Algorithm, lim limiters.Limit) string {
	if a.IsBucket() {
		return fmt.Sprintf(":%s:%d@%d", a, lim.Quota(), int64(lim.Interval()))
	}
	return fmt.Sprintf(":%s:%d/%d", a, lim.N, int64(lim.Per))
}

// appendKey appends the Redis key that holds key's state under the limit
// whose key suffix is suffix: Prefix{tag}suffix, the tag the key escaped
// or, packed, "%b" and the number of the hash its field is in.
func (l *Limiter) appendKey(b []byte, key, suffix string) []byte {
	b = append(append(b, l.o.Prefix...), '{')
	if l.packed > 0 {
		b = strconv.AppendUint(append(b, "%b"...), hashOf(key, l.packed), 10)
	} else {
		b = append(b, escape(key)...)
	}
	return append(append(b, '}'), suffix...)
}

// hashOf picks the hash of n that key is packed in: FNV-1a, the same in
// every process of a fleet.
func hashOf(key string, n uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return h % n
}

// userKey returns the caller's key of one of the limiter's Redis keys.
func (l *Limiter) userKey(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, l.o.Prefix+"{")
	if !ok {
		return "", false
	}
	for _, s := range l.suffix {
		if key, ok := strings.CutSuffix(rest, "}"+s); ok {
			return unescape(key)
		}
	}
	return "", false
}

// The caller's key is the hash tag, between braces, so it must hold no
// brace and must not be empty (Redis Cluster hashes all of "x{}y"): escape
// writes {, } and % as %7B, %7D and %25, and the empty key as %.
var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func escape(key string) string {
	switch {
	case key == "":
		return "%"
	case !strings.ContainsAny(key, "{}%"):
		return key
	}
	return escaper.Replace(key)
}

var unescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

func unescape(tag string) (string, bool) {
	switch {
	case tag == "%":
		return "", true
	case strings.ContainsAny(tag, "{}"):
		return "", false
	}
	return unescaper.Replace(tag), true
}

// glob escapes s for a SCAN MATCH pattern.
func glob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
