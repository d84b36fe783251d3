package sync

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/readsync/readsync/apiclient"
)

// FailureGroup is names of a pass that failed for one shared reason, so
// that a report can give the reason once.
type FailureGroup struct {
	// Names are the names, sorted.
	Names []string
	// Cause is the shared reason.
	Cause string
	// CutOff is true when the names were not done because the pass ended
	// or stopped asking an unavailable upstream, rather than for a reason
	// of their own; the next pass asks for them again.
	CutOff bool
}

// notRegisteredCause is the reason given once for the names whose details
// the upstream answered with its failure envelope.
var notRegisteredCause = "upstream reported failure for their project details; " + apiclient.ErrNotRegistered.Error()

// Grouped splits failed into the names that failed for reasons of their
// own, in their order, and groups of names that share one reason: those
// the end of the pass or an outage cut off (a group per cause), then those
// the upstream may not know (apiclient.ErrNotRegistered), which a new
// schedules file with a typo lists together.
func Grouped(failed []NameError) (own []NameError, groups []FailureGroup) {
	byCause := map[string]int{}
	add := func(cause string, cutOff bool, nft string) {
		i, ok := byCause[cause]
		if !ok {
			i = len(groups)
			byCause[cause] = i
			groups = append(groups, FailureGroup{Cause: cause, CutOff: cutOff})
		}
		groups[i].Names = append(groups[i].Names, nft)
	}
	var notRegistered []string
	for _, f := range failed {
		var c *cutOffError
		switch {
		case errors.As(f.Err, &c):
			add(c.Error(), true, f.NFT)
		case errors.Is(f.Err, apiclient.ErrNotRegistered):
			notRegistered = append(notRegistered, f.NFT)
		default:
			own = append(own, f)
		}
	}
	for _, nft := range notRegistered {
		add(notRegisteredCause, false, nft)
	}
	for i := range groups {
		slices.Sort(groups[i].Names)
	}
	return own, groups
}

// List quotes the group's first show names and counts the rest, as in
// `"a.eth", "b.eth" and 3 more`; show <= 0 quotes them all.
func (g FailureGroup) List(show int) string {
	if show <= 0 || show > len(g.Names) {
		show = len(g.Names)
	}
	quoted := make([]string, 0, show)
	for _, n := range g.Names[:show] {
		quoted = append(quoted, strconv.Quote(n))
	}
	s := strings.Join(quoted, ", ")
	if more := len(g.Names) - show; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
