package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Key says how the target tells users apart: by a request header, by a
// query parameter, or by the client's address (each user sends from its
// own, of Target.Sources).
type Key struct {
	Kind string // "header", "query" or "source"
	Name string // the header's or the parameter's
}

// ParseKey reads --key: header:NAME, query:NAME or source.
func ParseKey(s string) (Key, error) {
	if s == "source" {
		return Key{Kind: "source"}, nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" || (kind != "header" && kind != "query") {
		return Key{}, fmt.Errorf("probe: the key %q: want header:NAME, query:NAME or source", s)
	}
	return Key{Kind: kind, Name: name}, nil
}

// String is the key as --key takes it.
func (k Key) String() string {
	if k.Kind == "source" {
		return k.Kind
	}
	return k.Kind + ":" + k.Name
}

// Target is the endpoint a probe drives, and how it answers.
type Target struct {
	URL string
	Key Key
	// Deny are the statuses that mean refused. When empty the probe learns
	// it: 429, or the status that appears on a fresh key pressed back to
	// back once it has been admitted (nginx's default 503, 403, 420). An
	// answer that is neither a 2xx or 3xx nor a refusal (400, 401, 404, a
	// 5xx, none at all) is counted apart, never as admitted.
	Deny []int
	// Method, Header and Body are what each request carries: GET with no
	// body when empty. The key's header, when the key is one, is set over
	// Header's.
	Method string
	Header http.Header
	Body   []byte
	// Sources are the addresses users send from, for a Key of kind
	// "source".
	Sources *Sources
}

// Validate reports whether t can be probed.
func (t Target) Validate() error {
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("probe: the target %q: want an http:// or https:// URL", t.URL)
	}
	if t.Key.Kind == "" {
		return errors.New("probe: the target needs --key, how it tells users apart")
	}
	if (t.Key.Kind == "source") != (t.Sources != nil) {
		return errors.New("probe: --key source and --source go together: the addresses users send from, as in 127.0.0.2-127.0.0.254")
	}
	for _, s := range t.Deny {
		if s < 400 || s > 599 {
			return fmt.Errorf("probe: --deny-status %d: a refusal is a 4xx or a 5xx", s)
		}
	}
	if t.Method != "" && !validMethod(t.Method) {
		return fmt.Errorf("probe: --method %q: want a method, as in GET or POST", t.Method)
	}
	return nil
}

// validMethod reports whether m is an HTTP token.
func validMethod(m string) bool {
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return m != ""
}

// request is one request of a probe's plan: for a user's key (none, when
// empty), At after the plan starts.
type request struct {
	Key string
	At  time.Duration
}

// answer is what came back for one request.
type answer struct {
	observation
	// Intended is when the plan meant to send it: Sent minus Intended is
	// how late the sender was.
	Intended time.Time
	Status   int         // 0 when none came back
	Header   http.Header // the answer's headers
	Err      string      // why none came back, if none did
	// Refused: Status is the target's refusal. An answer neither
	// Admitted nor Refused was not a decision (prober.classify).
	Refused bool
}

// Decided reports whether the target decided the request: admitted it
// (a 2xx or 3xx) or refused it (its refusal's status).
func (a answer) Decided() bool { return a.Admitted || a.Refused }

// errNotDeciding is returned when the target decides none of the first
// requests: it fails them all, or answers them with a status that is
// neither an admission nor its refusal.
var errNotDeciding = errors.New("probe: the target decides nothing")

// deadAfter is how many answers, none of them a decision, stop a plan.
const deadAfter = 20

// seqParam carries each request's number in its URL, where vegeta's result
// keeps it: a target ignores a query parameter it does not know.
const seqParam = "ratelab-probe"

// exchange is how a probe talks to its target: the clock it plans by, and
// a way to send a plan. The wire sends over HTTP; the tests' simulated
// targets decide in simulated time.
type exchange interface {
	now() time.Time
	// send sends plan, each request at its time after start (a zero start
	// is now), and returns the answers in the plan's order, each request
	// answered or not. stop, if not nil, is told each answer as it comes;
	// when it returns false, what is not yet sent is not sent.
	send(ctx context.Context, plan []request, start time.Time, stop func(answer) bool) ([]answer, error)
}

// wire is the exchange over HTTP with a target.
type wire struct {
	target  Target
	timeout time.Duration
}

func (w *wire) now() time.Time { return time.Now() }

func (w *wire) send(ctx context.Context, plan []request, start time.Time, stop func(answer) bool) ([]answer, error) {
	return sendPlan(ctx, w.target, plan, start, w.timeout, stop)
}

// wait sets how long a request waits for its answer: longer than
// --timeout for a target that holds its admissions longer.
func (w *wire) wait(d time.Duration) { w.timeout = d }

// sendPlan sends plan to t, each request at its time after start (vegeta's
// attacker, paced by the plan; a zero start is now), and returns the
// answers in the plan's order, those answered or failed (a request not
// sent has none). It never retries a request. Cancelling ctx stops it;
// what was answered by then is returned with ctx's error. stop, if not
// nil, is told each answer as it comes, and stops the plan when it
// returns false.
func sendPlan(ctx context.Context, t Target, plan []request, start time.Time, timeout time.Duration, stop func(answer) bool) ([]answer, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if !slices.IsSortedFunc(plan, func(a, b request) int { return int(a.At - b.At) }) {
		return nil, errors.New("probe: a plan's requests go in the order they are sent")
	}
	if len(plan) == 0 {
		return nil, nil
	}
	urls, sources, err := addresses(t, plan)
	if err != nil {
		return nil, err
	}
	a, done := attacker(t, len(plan), timeout)
	defer done()
	delay := max(time.Until(start), 0)
	paced := make(schedule, len(plan))
	for i, r := range plan {
		paced[i] = request{Key: r.Key, At: r.At + delay}
	}
	rec := &received{plan: plan, paced: paced, answers: make([]answer, len(plan)), seen: make([]bool, len(plan)), began: time.Now()}
	results := a.Attack(lockedTargeter(planTargeter(t, plan, urls, sources)), paced, paced[len(paced)-1].At+timeout+time.Second, "probe")
	halt := func() {
		a.Stop()
		// Drain: vegeta closes it once its workers end. The answers of
		// requests in flight are kept: the target decided them (a queue
		// held them), and what it decided is what it is.
		for res := range results {
			rec.record(res)
		}
	}
	for {
		select {
		case <-ctx.Done():
			halt()
			return rec.got(), ctx.Err()
		case res, ok := <-results:
			if !ok {
				return rec.got(), nil
			}
			i, ok := rec.record(res)
			if !ok {
				continue
			}
			if stop != nil && !stop(rec.answers[i]) {
				halt()
				return rec.got(), nil
			}
		}
	}
}

// planTargeter is vegeta's targeter of plan's requests to t, at urls
// (each with its number), keyed by a header or from sources.
func planTargeter(t Target, plan []request, urls, sources []string) vegeta.Targeter {
	var next int
	return func(tgt *vegeta.Target) error {
		// Called by vegeta's workers in turn; the number in the URL, not
		// the order of the calls, says which request it was.
		if next >= len(plan) {
			return vegeta.ErrNoTargets
		}
		i := next
		next++
		tgt.Method, tgt.URL, tgt.Body = cmp.Or(t.Method, http.MethodGet), urls[i], t.Body
		tgt.Header = t.Header.Clone()
		if tgt.Header == nil {
			tgt.Header = http.Header{}
		}
		switch {
		case t.Key.Kind == "header" && plan[i].Key != "":
			tgt.Header.Set(t.Key.Name, plan[i].Key)
		case sources[i] != "":
			tgt.Header.Set(sourceHeader, sources[i])
		}
		return nil
	}
}

// received are a plan's answers as they come, by the request's number.
type received struct {
	plan    []request
	paced   schedule
	answers []answer
	seen    []bool
	n       int
	began   time.Time
}

// record keeps res as its request's answer, and returns its number; false
// for a result of no request of the plan.
func (rec *received) record(res *vegeta.Result) (int, bool) {
	i, err := seqOf(res.URL)
	if err != nil || i < 0 || i >= len(rec.plan) {
		return 0, false
	}
	rec.answers[i] = answerOf(rec.plan[i], res)
	rec.answers[i].Intended = rec.began.Add(rec.paced[i].At)
	rec.seen[i] = true
	rec.n++
	return i, true
}

// got are the answers received, in the order planned.
func (rec *received) got() []answer {
	out := make([]answer, 0, rec.n)
	for i, ok := range rec.seen {
		if ok {
			out = append(out, rec.answers[i])
		}
	}
	return out
}

// attacker returns vegeta's attacker for a plan of n requests to t, and
// what to call once it is done with.
func attacker(t Target, n int, timeout time.Duration) (*vegeta.Attacker, func()) {
	opts := []func(*vegeta.Attacker){vegeta.Timeout(timeout), vegeta.Redirects(vegeta.NoFollow), vegeta.MaxBody(0),
		vegeta.Workers(8), vegeta.MaxWorkers(uint64(min(max(n, 8), 512))), vegeta.KeepAlive(true)}
	if t.Key.Kind != "source" {
		return vegeta.NewAttacker(opts...), func() {}
	}
	// Each user's requests from its own address, over connections of its
	// own.
	tr := newBySource(timeout)
	return vegeta.NewAttacker(append(opts, vegeta.Client(tr.client(timeout)))...), tr.close
}

// addresses returns each request's URL, with its number (and its key,
// for a query key), and the address it goes from, for a source key.
func addresses(t Target, plan []request) (urls, sources []string, err error) {
	base, err := url.Parse(t.URL)
	if err != nil {
		return nil, nil, err
	}
	urls, sources = make([]string, len(plan)), make([]string, len(plan))
	for i, r := range plan {
		if t.Key.Kind == "source" && r.Key != "" {
			a, err := t.Sources.addr(r.Key)
			if err != nil {
				return nil, nil, err
			}
			sources[i] = a.String()
		}
		u := *base
		q := u.Query()
		if t.Key.Kind == "query" && r.Key != "" {
			q.Set(t.Key.Name, r.Key)
		}
		q.Set(seqParam, strconv.Itoa(i))
		u.RawQuery = q.Encode()
		urls[i] = u.String()
	}
	return urls, sources, nil
}

// lockedTargeter makes tr safe for vegeta's workers, which call it at once.
func lockedTargeter(tr vegeta.Targeter) vegeta.Targeter {
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	return func(tgt *vegeta.Target) error {
		<-ch
		defer func() { ch <- struct{}{} }()
		return tr(tgt)
	}
}

func seqOf(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(u.Query().Get(seqParam))
}

// answerOf is what came back for r, not yet classified: the prober
// reads the status (prober.classify).
func answerOf(r request, res *vegeta.Result) answer {
	a := answer{observation: observation{Key: r.Key, N: 1, Sent: res.Timestamp, Received: res.End()}, Status: int(res.Code), Header: res.Headers, Err: res.Error}
	if a.Status != 0 {
		a.Err = ""
	}
	return a
}

// schedule paces vegeta by the plan: request i at plan[i].At.
type schedule []request

func (s schedule) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(s)) {
		return 0, true
	}
	return max(s[hits].At-elapsed, 0), false
}

func (s schedule) Rate(elapsed time.Duration) float64 {
	i, _ := slices.BinarySearchFunc(s, elapsed, func(r request, t time.Duration) int { return int(r.At - t) })
	if i+1 >= len(s) || s[i+1].At == s[i].At {
		return 0
	}
	return float64(time.Second) / float64(s[i+1].At-s[i].At)
}
