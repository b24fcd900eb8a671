package limiters

import (
	"fmt"
	"strings"
)

// Algorithm names a rate-limiting algorithm, as the CLI and config files
// spell it.
type Algorithm string

// The six algorithms.
const (
	FixedWindow    Algorithm = "fixed-window"
	SlidingLog     Algorithm = "sliding-log"
	SlidingCounter Algorithm = "sliding-counter"
	TokenBucket    Algorithm = "token-bucket"
	LeakyBucket    Algorithm = "leaky-bucket"
	GCRA           Algorithm = "gcra"
)

// Algorithms lists every algorithm: the window algorithms, then the bucket
// algorithms.
func Algorithms() []Algorithm {
	return []Algorithm{FixedWindow, SlidingLog, SlidingCounter, TokenBucket, LeakyBucket, GCRA}
}

// ParseAlgorithm returns the algorithm named s.
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, a := range Algorithms() {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, 0, 6)
	for _, a := range Algorithms() {
		names = append(names, string(a))
	}
	return "", fmt.Errorf("%w: unknown algorithm %q (want one of %s)", ErrInvalidParameter, s, strings.Join(names, ", "))
}

// IsBucket reports whether a takes a Bucket (capacity and rate) rather than
// a Window (limit and window).
func (a Algorithm) IsBucket() bool {
	return a == TokenBucket || a == LeakyBucket || a == GCRA
}

// Spec names an algorithm and its parameters: Window for the window
// algorithms, Bucket for the bucket algorithms (the other is ignored).
type Spec struct {
	Algorithm Algorithm
	Window    Window
	Bucket    Bucket
}

// Validate reports whether s names an algorithm with parameters it can
// enforce.
func (s Spec) Validate() error {
	if _, err := ParseAlgorithm(string(s.Algorithm)); err != nil {
		return err
	}
	if s.Algorithm.IsBucket() {
		return s.Bucket.Validate()
	}
	return s.Window.Validate()
}

// Judged is the window the limiter is judged against when its accuracy is
// compared with the ideal: N per W for a window algorithm, C per C/R for a
// bucket algorithm.
func (s Spec) Judged() Window {
	if s.Algorithm.IsBucket() {
		return s.Bucket.Window()
	}
	return s.Window
}

// String formats s as "algorithm N/W" or "algorithm C@R/s".
func (s Spec) String() string {
	if s.Algorithm.IsBucket() {
		return fmt.Sprintf("%s %v", s.Algorithm, s.Bucket)
	}
	return fmt.Sprintf("%s %v", s.Algorithm, s.Window)
}
