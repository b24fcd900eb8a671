package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ratelab/ratelab/workloads/accesslog"
)

// The limit run today, on a fleet's logs, counted both ways: a key
// behind two nodes sending 3 a second to each is over a limit of 4 a
// second the fleet shares, and under one each node keeps; a key sending 6
// a second to one node is over both. Planned in one pass and on two
// cores alike.
func TestCurrentOnAFleet(t *testing.T) {
	var a, b strings.Builder
	line := func(w *strings.Builder, ip string, sec, ms int) {
		fmt.Fprintf(w, `{"ts":%d.%03d,"ip":"%s"}`+"\n", 1796000000+sec, ms, ip)
	}
	for sec := range 120 {
		for i := range 3 {
			line(&a, "198.51.100.1", sec, 300*i)
			line(&b, "198.51.100.1", sec, 300*i+150)
		}
		for i := range 6 {
			line(&a, "203.0.113.7", sec, 150*i+10)
		}
		line(&b, "192.0.2.5", sec, 500) // a customer, under either
	}
	key, _ := accesslog.ParseKey("field:ip")
	today, err := ParseCurrent("4/s", nil, "", key)
	if err != nil {
		t.Fatal(err)
	}
	for _, cores := range []int{1, 2} {
		r, err := accesslog.NewReader([]accesslog.Input{{Name: "node-a/app.log", R: strings.NewReader(a.String())}, {Name: "node-b/app.log", R: strings.NewReader(b.String())}},
			accesslog.Options{Format: accesslog.JSON, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		c := Config{Spare: 0.001, Current: &today}
		var p *Plan
		if cores == 1 {
			p, err = Run(context.Background(), r, c, nil)
		} else {
			p, err = RunOnCores(context.Background(), r, c, cores, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		cur := p.Current
		if len(p.Sources) != 2 || cur.Nodes != 2 || cur.Clients != 2 || cur.NodeClients != 1 || cur.NodeRefused == 0 || cur.NodeRefused >= cur.Refused {
			t.Errorf("on %d cores: %d sources; today's limit %+v; want 2 nodes, 2 keys refused across them, 1 on each apart, fewer requests", cores, len(p.Sources), cur)
		}
		if v := p.Verdict(); !strings.Contains(v, "kept on each node apart (nginx on each host), it refuses 1 key") {
			t.Errorf("on %d cores: %s", cores, v)
		}
	}
}
