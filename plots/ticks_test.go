package plots

import (
	"slices"
	"testing"
)

// A linear axis is labelled from zero at round steps, in plain numbers.
func TestLinearTicks(t *testing.T) {
	for _, tc := range []struct {
		max  float64
		want []string
	}{
		{279, []string{"0", "50", "100", "150", "200", "250"}},
		{60, []string{"0", "10", "20", "30", "40", "50", "60"}},
		{1, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{12345, []string{"0", "2k", "4k", "6k", "8k", "10k", "12k"}},
		{8, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8"}},
	} {
		var got []string
		for _, tk := range (linearTicks{}).Ticks(0, tc.max) {
			got = append(got, tk.Label)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ticks of 0 to %g: %q, want %q", tc.max, got, tc.want)
		}
	}
	if got := (linearTicks{}).Ticks(5, 5); got != nil {
		t.Errorf("ticks of an empty range: %v", got)
	}
}
