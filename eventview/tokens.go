package eventview

import "github.com/flowrun/flowrun/runtime"

// TokensEstimated reports whether any model turn among events counted its
// tokens locally because the server reported none, so that a view of the
// run's total can say so.
func TokensEstimated(events []runtime.Event) bool {
	for _, e := range events {
		if e.Type == runtime.EventModelTurn && e.Turn != nil && e.Turn.Tokens().Estimated {
			return true
		}
	}
	return false
}
