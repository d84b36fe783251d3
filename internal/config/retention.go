package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Retention is how long a resolution of the history is kept: a Go
// duration, or a whole number of days with a d suffix (90d); empty or 0
// keeps it forever.
type Retention time.Duration

func (r *Retention) EnvDecode(v string) error {
	s := strings.TrimSpace(v)
	if s == "" || s == "0" {
		*r = 0
		return nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("retention %q: want a whole number of days such as 90d", v)
		}
		*r = Retention(time.Duration(n) * 24 * time.Hour)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("retention %q: want a duration such as 90d or 720h", v)
	}
	*r = Retention(d)
	return nil
}

// Duration is the retention as a duration, 0 for forever.
func (r Retention) Duration() time.Duration { return time.Duration(r) }

// String writes the retention as days when it is whole days.
func (r Retention) String() string {
	d := time.Duration(r)
	switch {
	case d == 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// retentionForm is what a retention looks like.
const retentionForm = "a duration such as 90d (days) or 720h, or 0 or empty to keep forever"

// checkRetention holds the retentions to what the history needs: the raw
// rows of at least two of each schedule's longest intervals (a snapshot's
// gains read the snapshot before it), and each coarser resolution kept at
// least as long as a finer one, forever counting as longest.
func (c *Config) checkRetention(p *problems, decoded map[string]bool) {
	raw := c.RetainRaw.Duration()
	if decoded["READSYNC_RETAIN_RAW"] && raw > 0 {
		for _, s := range c.Schedules {
			if need := 2 * s.LongestInterval(); raw < need {
				p.add(fmt.Errorf("READSYNC_RETAIN_RAW=%q: shorter than two intervals of schedule %q (%q, up to %s apart): a snapshot's reads gained are computed from the one before it; keep at least %s",
					p.raw["READSYNC_RETAIN_RAW"], s.Name, s.Cron, s.LongestInterval(), Retention(need)))
			}
		}
	}
	// Each coarser resolution against the finer before it; forever is
	// the longest.
	chain := []struct {
		name string
		keep Retention
	}{{"READSYNC_RETAIN_RAW", c.RetainRaw}, {"READSYNC_RETAIN_HOURLY", c.RetainHourly}, {"READSYNC_RETAIN_DAILY", c.RetainDaily}}
	for i := 1; i < len(chain); i++ {
		fine, coarse := chain[i-1], chain[i]
		if !decoded[fine.name] || !decoded[coarse.name] || coarse.keep == 0 || (fine.keep != 0 && coarse.keep >= fine.keep) {
			continue
		}
		fix := "set it to " + fine.keep.String() + " or more, or 0 to keep them forever"
		if fine.keep == 0 {
			fix = "set it to 0 to keep them forever too, or set " + fine.name
		}
		p.add(fmt.Errorf("%s=%q: shorter than %s=%q (%s): a coarser resolution keeps its rows at least as long as a finer one; %s",
			coarse.name, p.raw[coarse.name], fine.name, p.raw[fine.name], fine.keep, fix))
	}
}
