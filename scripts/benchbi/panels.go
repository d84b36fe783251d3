package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// panelQueries returns the dashboard's panels that read the views, as
// Grafana's ClickHouse plugin sends them with All projects selected and the
// time range covering the history.
func (b *bencher) panelQueries() ([]query, error) {
	raw, err := os.ReadFile(b.o.dashboard)
	if err != nil {
		return nil, fmt.Errorf("-dashboard: %w", err)
	}
	var d struct {
		Panels []struct {
			Title string `json:"title"`
			// TimeFrom is a panel's own range ending now, e.g. "2d".
			TimeFrom string `json:"timeFrom"`
			Targets  []struct {
				RawSQL string `json:"rawSql"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
				// Query is the plugin's {"rawSql": …} for a query
				// variable, a string for others.
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", b.o.dashboard, err)
	}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	to := start.AddDate(0, 0, b.o.days)
	// The hidden variable raw_from, as Grafana reads it: where the kept
	// raw rows start, 0 while none expired.
	var rawFrom uint32
	if err := b.inDB.QueryRow(context.Background(), "SELECT toUInt32(max(kept_from)) FROM expiries WHERE table != '' AND resolution = 'raw'").Scan(&rawFrom); err != nil {
		return nil, fmt.Errorf("read the variable raw_from: %w", err)
	}
	var out []query
	// The hidden variable latest, as Grafana reads it with All projects:
	// the keys of the 10 newest messages, which a panel reads the curves
	// of. Its query is timed too: Grafana sends it with the panel's.
	var latest string
	for _, v := range d.Templating.List {
		if v.Name != "latest" {
			continue
		}
		var q struct {
			RawSQL string `json:"rawSql"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("variable latest: %w", err)
		}
		sql, err := sentWithAll(q.RawSQL, start, to)
		if err != nil {
			return nil, fmt.Errorf("variable latest: %w", err)
		}
		if err := b.inDB.QueryRow(context.Background(), sql).Scan(&latest); err != nil {
			return nil, fmt.Errorf("read the variable latest: %w", err)
		}
		out = append(out, query{name: "variable: latest (all projects)", new: sql})
	}
	for _, p := range d.Panels {
		from, span := start, fmt.Sprintf("%d days", b.o.days)
		if p.TimeFrom != "" {
			days, err := strconv.Atoi(strings.TrimSuffix(p.TimeFrom, "d"))
			if err != nil {
				return nil, fmt.Errorf("panel %q: timeFrom %q: this bench knows only days, such as 2d", p.Title, p.TimeFrom)
			}
			from, span = to.AddDate(0, 0, -days), p.TimeFrom
		}
		for _, t := range p.Targets {
			if !slices.ContainsFunc([]string{"project_read_daily", "message_read_latest", "project_read_snapshots", "project_read_gains", "project_read_daily_gains",
				"project_read_hourly", "message_read_by_age", "message_read_speed"},
				func(v string) bool { return strings.Contains(t.RawSQL, v) }) {
				continue
			}
			// The message variable picks one curve: project 7's first.
			sql := strings.NewReplacer("${raw_from}", strconv.FormatUint(uint64(rawFrom), 10), "${message}", "7-7000000", "${latest:raw}", latest).Replace(t.RawSQL)
			sql, err := sentWithAll(sql, from, to)
			if err != nil {
				return nil, fmt.Errorf("panel %q: %w", p.Title, err)
			}
			out = append(out, query{name: fmt.Sprintf("panel: %s (all projects, %s)", p.Title, span), new: sql})
		}
	}
	return out, nil
}

const conditionalAll = "$__conditionalAll("

var (
	dateFilter = regexp.MustCompile(`\$__dateFilter\((\w+)\)`)
	timeFilter = regexp.MustCompile(`\$__timeFilter\((\w+)\)`)
	reference  = regexp.MustCompile(`\$\{?\w+`)
)

// sentWithAll returns a panel's SQL as the plugin sends it, over from to to,
// with All selected in every variable (and raw_from already given its
// value): its frontend makes each
// $__conditionalAll(condition, $variable) 1=1, its backend expands
// $__dateFilter and $__timeFilter. deployments/grafana/dashboard_test.go runs
// the dashboard through a fuller model of Grafana and the plugin
// (deployments/grafana/grafana_test.go) on both test servers; this is what All
// needs of it.
func sentWithAll(sql string, from, to time.Time) (string, error) {
	for i := strings.LastIndex(sql, conditionalAll); i >= 0; i = strings.LastIndex(sql, conditionalAll) {
		open := i + len(conditionalAll) - 1
		end := closingParenthesis(sql[open:])
		if end < 0 {
			return "", fmt.Errorf("%s at byte %d is not closed", conditionalAll, i)
		}
		sql = sql[:i] + "1=1" + sql[open+end+1:]
	}
	date := func(t time.Time) string { return "toDate('" + t.UTC().Format(time.DateOnly) + "')" }
	sql = dateFilter.ReplaceAllString(sql, "$1 >= "+date(from)+" AND $1 <= "+date(to))
	sql = timeFilter.ReplaceAllString(sql, fmt.Sprintf("$1 >= toDateTime(%d) AND $1 <= toDateTime(%d)", from.Unix(), to.Unix()))
	if m := reference.FindString(sql); m != "" {
		return "", fmt.Errorf("%s: this bench expands only $__conditionalAll, $__dateFilter and $__timeFilter", m)
	}
	return sql, nil
}

// closingParenthesis returns the index in s of the parenthesis that closes
// s[0], or -1.
func closingParenthesis(s string) int {
	depth := 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}
