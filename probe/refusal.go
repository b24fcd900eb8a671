package probe

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Refusal is how the target says "refused", and what else it answered.
type Refusal struct {
	// Status is the refusal's status: 429, one learned (the status that
	// appeared on a fresh key pressed back to back after its admissions),
	// or --deny-status's first.
	Status int `json:"status"`
	// From says where Status comes from: "--deny-status", "learned", "429"
	// (seen) or "default" (no refusal seen: 429 would be one).
	From string `json:"from"`
	// Other counts the answers that were neither an admission nor a
	// refusal, by status ("0": no answer at all).
	Other map[int]int `json:"other,omitempty"`
}

// String says the refusal as the checks table shows it: "503 (learned)",
// "429; otherwise 400 Bad Request (20)".
func (r Refusal) String() string {
	s := fmt.Sprint(r.Status)
	switch r.From {
	case "learned", "--deny-status":
		s += " (" + r.From + ")"
	case "default":
		s = "none seen (429 would be one)"
	}
	if len(r.Other) > 0 {
		s += "; otherwise " + statusCounts(r.Other)
	}
	return s
}

// wrongRequest are the statuses that say the request itself is wrong,
// or that the server failed it: never learned as a refusal (--deny-status
// still makes any of them one).
var wrongRequest = []int{400, 401, 404, 405, 406, 411, 413, 414, 415, 431, 500, 501, 502, 504, 505}

// refuses reports whether status is the target's refusal.
func (p *prober) refuses(status int) bool {
	if len(p.c.Target.Deny) > 0 {
		return slices.Contains(p.c.Target.Deny, status)
	}
	return status == http.StatusTooManyRequests || (p.refusal != 0 && status == p.refusal)
}

// classify reads a's status: a 2xx or 3xx is an admission, the target's
// refusal a refusal, and anything else (none at all included) neither.
func (p *prober) classify(a answer) answer {
	a.Admitted = a.Status >= 200 && a.Status < 400
	a.Refused = !a.Admitted && a.Status != 0 && p.refuses(a.Status)
	return a
}

// learn looks in answers for the target's refusal when neither
// --deny-status nor a 429 has said it: on each key, in the order sent,
// the statuses (but wrongRequest's) that follow an admission on that
// key. A limiter refuses a key it has admitted; a status on every
// request is no limiter's. It reports whether it learned one.
func (p *prober) learn(answers []answer) bool {
	if len(p.c.Target.Deny) > 0 || p.refusal != 0 {
		return false
	}
	byKey := map[string][]answer{}
	for _, a := range answers {
		if a.Status != 0 {
			byKey[a.Key] = append(byKey[a.Key], a)
		}
	}
	after := map[int]int{}
	for _, as := range byKey {
		slices.SortStableFunc(as, func(a, b answer) int { return a.Sent.Compare(b.Sent) })
		admitted := false
		for _, a := range as {
			switch s := a.Status; {
			case s >= 200 && s < 400:
				admitted = true
			case admitted && s >= 400 && !slices.Contains(wrongRequest, s):
				after[s]++
			}
		}
	}
	if after[http.StatusTooManyRequests] > 0 || len(after) == 0 {
		return false
	}
	// The most frequent, the lowest of equals.
	for _, s := range slices.Sorted(maps.Keys(after)) {
		if after[s] > after[p.refusal] {
			p.refusal = s
		}
	}
	return true
}

// statusCounts says counts by status: "400 Bad Request (12), no answer (3)".
func statusCounts(counts map[int]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s (%d)", statusText(s), counts[s]))
	}
	return strings.Join(parts, ", ")
}

func statusText(s int) string {
	if s == 0 {
		return "no answer"
	}
	if t := http.StatusText(s); t != "" {
		return fmt.Sprintf("%d %s", s, t)
	}
	return fmt.Sprint(s)
}

// undecidedWhy says what answers that decided nothing were, and what the
// likely cause is: "every answer was 400 Bad Request: is the key right
// (--key header:X-User)?".
func undecidedWhy(t Target, answers []answer) string {
	counts := map[int]int{}
	firstErr := ""
	for _, a := range answers {
		counts[a.Status]++
		if a.Status == 0 && firstErr == "" {
			firstErr = a.Err
		}
	}
	if len(counts) != 1 {
		return fmt.Sprintf("the %d answers were %s", len(answers), statusCounts(counts))
	}
	var s int
	for s = range counts {
	}
	every := fmt.Sprintf("every answer (%d) was %s", len(answers), statusText(s))
	if len(answers) == 1 {
		every = "the answer was " + statusText(s)
	}
	switch {
	case s == 0:
		return fmt.Sprintf("no answer came back (%s)", firstErr)
	case s == http.StatusBadRequest && t.Key.Kind != "source":
		return fmt.Sprintf("%s: is the key right (--key %s)? A target keyed otherwise refuses a request without its key", every, t.Key)
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		return every + `: does the target need credentials? --header "Authorization: ..." sends them`
	case s == http.StatusNotFound:
		return every + ": is the URL right?"
	case s == http.StatusMethodNotAllowed:
		return fmt.Sprintf("%s: the target does not take %s (--method)", every, cmp.Or(t.Method, http.MethodGet))
	case s == http.StatusUnsupportedMediaType, s == http.StatusUnprocessableEntity:
		return every + `: does the target want a body of another kind? --body @FILE and --header "Content-Type: ..."`
	case s >= 500:
		return every + ": the target fails every request"
	}
	return every + ": neither an admission (2xx, 3xx) nor a refusal (--deny-status, if it is one)"
}

// refusalSeen is the Refusal of the probe so far.
func (p *prober) refusalSeen() Refusal {
	r := Refusal{Status: http.StatusTooManyRequests, From: "default"}
	switch {
	case len(p.c.Target.Deny) > 0:
		r.Status, r.From = p.c.Target.Deny[0], "--deny-status"
	case p.refusal != 0:
		r.Status, r.From = p.refusal, "learned"
	}
	for _, a := range p.r.all {
		switch {
		case a.Refused && r.From == "default":
			r.From = "429"
		case !a.Decided() && a.Key != "": // the keyless check's are its own
			if r.Other == nil {
				r.Other = map[int]int{}
			}
			r.Other[a.Status]++
		}
	}
	return r
}
