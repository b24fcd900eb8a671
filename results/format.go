package results

import (
	"strconv"
	"strings"
)

// Count formats n with thousands separators.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + Count(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Wrap breaks s into lines of at most width characters, at spaces.
func Wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && n+1+len(word) > width {
			b.WriteByte('\n')
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
