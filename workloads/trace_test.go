package workloads

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, in string) ([]Request, error) {
	t.Helper()
	tr := NewTraceReader(strings.NewReader(in))
	var out []Request
	for {
		r, err := tr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func TestTraceReads(t *testing.T) {
	in := "t,key,n\n# a comment\n\n0,alice\n1e-3,\"carol, jr\",1\n 0.5 , bob ,3\n2.000000001,alice\n"
	got, err := readAll(t, in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{0, "alice", 1, nil},
		{time.Millisecond, "carol, jr", 1, nil},
		{500 * time.Millisecond, "bob", 3, nil},
		{2*time.Second + 1, "alice", 1, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d requests, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestTraceHeaderOnlyFirst(t *testing.T) {
	// A header later in the file is a malformed line, not a header.
	_, err := readAll(t, "0,a\nt,key,n\n")
	var te *TraceError
	if !errors.As(err, &te) || te.Line != 2 {
		t.Fatalf("header on line 2: err = %v, want a TraceError on line 2", err)
	}
}

func TestTraceMalformed(t *testing.T) {
	for _, tt := range []struct {
		in   string
		line int
		says string
	}{
		{"0,a\nabc,b\n", 2, `time "abc" is not a number`},
		{"0,a\n\n# c\n-1,b\n", 4, "outside"},
		{"NaN,a\n", 1, "not a number"},
		{"1e300,a\n", 1, "outside"},
		{"0,\n", 1, "key is empty"},
		{"0,a,0\n", 1, `cost "0" is not a positive integer`},
		{"0,a,-2\n", 1, "not a positive integer"},
		{"0,a,1.5\n", 1, "not a positive integer"},
		{"0,a,3000000000\n", 1, "more than any limit"},
		{"0\n", 1, "got 1 fields"},
		{"0,a,1,2,3,4\n", 1, "got 6 fields"},
		{"0,a,1,-2\n", 1, `actual cost "-2" is not an integer from 0`},
		{"0,a,1,lots\n", 1, `actual cost "lots"`},
		{"0,a,1,2,-1\n", 1, `took "-1" is not a number of seconds`},
		{"0,a,1,2,NaN\n", 1, `took "NaN"`},
		{"0,a\n1,\"unterminated\n", 2, "quote"},
	} {
		_, err := readAll(t, tt.in)
		var te *TraceError
		if !errors.As(err, &te) {
			t.Errorf("%q: err = %v, want a *TraceError", tt.in, err)
			continue
		}
		if te.Line != tt.line || !strings.Contains(err.Error(), tt.says) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err = %q (line %d), want line %d saying %q", tt.in, err, te.Line, tt.line, tt.says)
		}
	}
}

// Whatever the input, the reader returns requests it could parse or an
// error naming a line that exists, and never panics.
func FuzzTrace(f *testing.F) {
	for _, seed := range []string{
		"t,key,n\n0,a\n0.5,b,2\n",
		"# c\n\n1e-9,\"x, y\",3\n",
		"0,a\n1,\"unterminated\n",
		"nan,a\n-0,b\n+Inf,c\n",
		"0,a,99999999999999999999\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lines := strings.Count(in, "\n") + 1
		reqs, err := readAll(t, in)
		var te *TraceError
		if err != nil && (!errors.As(err, &te) || te.Line < 1 || te.Line > lines) {
			t.Fatalf("error %v: want a TraceError on a line in 1..%d", err, lines)
		}
		for _, r := range reqs {
			if r.T < 0 || r.N < 1 || r.Key == "" {
				t.Fatalf("read an impossible request %+v", r)
			}
		}
	})
}

func TestTraceSkipsAndOrders(t *testing.T) {
	// A byte order mark, spaces-only lines, indented comments: skipped.
	got, err := readAll(t, "\ufefft,key\n   \n  # indented\n0,a\n \t \n1,a\n1,b\n")
	if err != nil || len(got) != 3 {
		t.Fatalf("read %v, %v; want 3 requests", got, err)
	}
	// Time must not go back.
	_, err = readAll(t, "0,a\n5,a\n# note\n2,b\n")
	var te *TraceError
	if !errors.As(err, &te) || te.Line != 4 || !strings.Contains(err.Error(), "time 2 is before line 2's 5") {
		t.Fatalf("time going back: err = %v, want a TraceError on line 4 naming line 2", err)
	}
}

// A trace that says what each request really cost: the estimate in n, the
// actual cost and, if given, how long after it was known; a header of five
// columns; a workload of it keeps the actual costs only when every line
// has one.
func TestTraceActual(t *testing.T) {
	got, err := readAll(t, "t,key,n,actual,took\n0,alice,500,120,2.5\n1,bob,100,1500\n2,alice,50,0\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []After{{120, 2500 * time.Millisecond}, {1500, 0}, {0, 0}}
	if len(got) != 3 || got[0].N != 500 || got[1].N != 100 {
		t.Fatalf("read %+v", got)
	}
	for i, w := range want {
		if got[i].After == nil || *got[i].After != w {
			t.Errorf("request %d: %+v, want %+v", i, got[i].After, w)
		}
	}
	w, err := FromTrace(NewTraceReader(strings.NewReader("0,alice,500,120,2.5\n1,bob,100,1500\n")))
	if err != nil || len(w.After) != 2 || w.After[1].Actual != 1500 {
		t.Errorf("a workload of it: %+v, %v", w.After, err)
	}
	w, err = FromTrace(NewTraceReader(strings.NewReader("0,alice,500,120\n1,bob,100\n")))
	if err != nil || w.After != nil {
		t.Errorf("a workload with one actual cost missing: %+v, %v", w.After, err)
	}
}
