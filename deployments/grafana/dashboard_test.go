package grafana_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/expiry"
	"github.com/readsync/readsync/sink/schema"
	"github.com/readsync/readsync/sink/sinktest/historytest"
)

const (
	dashboardFile  = "readsync.json"
	datasourceType = "grafana-clickhouse-datasource"
	datasourceUID  = "${datasource}"
	// Grafana's ClickHouse plugin: format 0 is a time series (which needs
	// a column named time), 1 a table.
	formatTimeSeries = 0
	formatTable      = 1
	// pluginVersion is the first release of the plugin whose macros give
	// SQL that ClickHouse 18.16 runs (grafana_test.go): the version the
	// dashboard requires.
	pluginVersion = "4.0.3"
	// pushDown ends every read panel's query: 18.16 pushes a filter into
	// a view only with it (docs/dashboards.md).
	pushDown = "SETTINGS enable_optimize_predicate_expression = 1"
)

// The parts of a Grafana dashboard the tests look at.
type (
	dashboard struct {
		UID      string        `json:"uid"`
		Title    string        `json:"title"`
		Timezone string        `json:"timezone"`
		Requires []requirement `json:"__requires"`
		// Time is the default time range, e.g. now-30d to now.
		Time struct {
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"time"`
		Templating struct {
			List []variable `json:"list"`
		} `json:"templating"`
		Panels []panel `json:"panels"`
	}
	variable struct {
		Name       string          `json:"name"`
		Type       string          `json:"type"`
		Query      json.RawMessage `json:"query"`
		Datasource *datasourceRef  `json:"datasource"`
		Multi      bool            `json:"multi"`
		IncludeAll bool            `json:"includeAll"`
		AllValue   string          `json:"allValue"`
		// Current is the saved selection; its value a string or a list.
		Current struct {
			Value json.RawMessage `json:"value"`
		} `json:"current"`
	}
	panel struct {
		ID         int            `json:"id"`
		Title      string         `json:"title"`
		Type       string         `json:"type"`
		Datasource *datasourceRef `json:"datasource"`
		Targets    []target       `json:"targets"`
		Panels     []panel        `json:"panels"` // a collapsed row's
		// TimeFrom is the panel's own time range ending now, e.g. "2d".
		TimeFrom  string `json:"timeFrom"`
		TimeShift string `json:"timeShift"`
		// Interval is the panel's minimum interval, e.g. "1h".
		Interval string `json:"interval"`
	}
	target struct {
		RefID      string         `json:"refId"`
		Datasource *datasourceRef `json:"datasource"`
		EditorType string         `json:"editorType"`
		Format     *int           `json:"format"`
		RawSQL     string         `json:"rawSql"`
	}
	datasourceRef struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	// requirement is a plugin the dashboard needs, and its version.
	requirement struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Version string `json:"version"`
	}
)

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	return &d
}

// queryPanels returns every panel that shows data, rows flattened.
func queryPanels(d *dashboard) []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// The tables and views readsync maintains; a panel that reads anything
// else reads something readsync does not write.
var readsyncObjects = []string{"projects", "messages", "message_read_snapshots", "sync_runs",
	"message_read_latest", "project_read_daily", "project_read_snapshots", "schedule_coverage", "project_read_gains", "project_read_daily_gains",
	"name_health", "project_read_hourly", "project_read_hourly_gains", "expiries", "message_read_by_age", "message_read_speed", "project_read_by_age"}

var fromIdent = regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+([A-Za-z_][A-Za-z0-9_.]*)`)

func TestDashboardStructure(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title (uid %q, title %q)", d.UID, d.Title)
	}
	if d.Timezone != "utc" {
		t.Errorf("dashboard time zone %q, want utc: the views' days are UTC days", d.Timezone)
	}
	i := slices.IndexFunc(d.Requires, func(r requirement) bool { return r.ID == datasourceType })
	if i < 0 || d.Requires[i].Version != pluginVersion {
		t.Errorf("dashboard must require the %s plugin %s (__requires: %+v)", datasourceType, pluginVersion, d.Requires)
	}
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds := vars["datasource"]; ds.Type != "datasource" || string(ds.Query) != strconv.Quote(datasourceType) {
		t.Errorf("want a datasource variable of type %s, got %+v", datasourceType, ds)
	}
	project := vars["project"]
	if project.Type != "query" || project.Datasource == nil || *project.Datasource != (datasourceRef{datasourceType, datasourceUID}) ||
		variableSQL(t, project) == "" || !project.Multi || !project.IncludeAll {
		t.Errorf("want a multi-value project variable queried from %s, got %+v", datasourceUID, project)
	}

	ids := map[int]bool{}
	read := map[string]bool{}
	panels := queryPanels(d)
	if len(panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Datasource == nil || *p.Datasource != (datasourceRef{datasourceType, datasourceUID}) {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			if tg.RawSQL == "" || tg.EditorType != "sql" || tg.Format == nil ||
				tg.Datasource == nil || *tg.Datasource != (datasourceRef{datasourceType, datasourceUID}) {
				t.Errorf("panel %q query %s: want SQL on ${datasource} with a format, got %+v", p.Title, tg.RefID, tg)
			}
			// A trend plots a numeric x field (the age panels' hours), not
			// time: the plugin's table format gives it one.
			if want := map[string]int{"timeseries": formatTimeSeries, "table": formatTable, "trend": formatTable}[p.Type]; tg.Format != nil && *tg.Format != want {
				t.Errorf("panel %q (%s) query %s has format %d, want %d", p.Title, p.Type, tg.RefID, *tg.Format, want)
			}
			if strings.Contains(tg.RawSQL, "project_id") && !strings.HasSuffix(tg.RawSQL, "\n"+pushDown) {
				t.Errorf("panel %q filters on project_id: its query must end with a line %q", p.Title, pushDown)
			}
			objs := fromIdent.FindAllStringSubmatch(tg.RawSQL, -1)
			if len(objs) == 0 {
				t.Errorf("panel %q reads no table:\n%s", p.Title, tg.RawSQL)
			}
			for _, m := range objs {
				if !slices.Contains(readsyncObjects, m[1]) {
					t.Errorf("panel %q reads %s, which readsync does not maintain", p.Title, m[1])
				}
				read[m[1]] = true
			}
		}
	}
	for _, want := range []string{"project_read_daily", "message_read_latest", "project_read_snapshots", "sync_runs", "schedule_coverage",
		"project_read_daily_gains", "name_health", "project_read_hourly", "message_read_by_age", "message_read_speed", "project_read_by_age"} {
		if !read[want] {
			t.Errorf("no panel reads %s", want)
		}
	}
}

// dashboardNow is the moment at which the tests open the dashboard: the
// fixture's history lies before it, in the dashboard's default time range
// and in the two days that the per-snapshot panel shows.
var dashboardNow = time.Date(2026, 3, 3, 6, 0, 0, 0, time.UTC)

// dashboardProjects are the fixture's projects. Their nft names hold what a
// value written into SQL would have to quote or escape.
var dashboardProjects = []struct {
	id        int64
	nft, name string
}{
	{1, "alice.dmail", "Alice"},
	{2, "bob & co.dmail", "Bob & Co."},
	{3, "o'neil.eth", "O'Neil"},
	{4, `back\slash, "quoted".dmail`, `Back\slash, "Quoted"`},
}

// dashboardFailurePanels are the panels that list failures: a time range
// without any leaves them empty.
var dashboardFailurePanels = []string{"Failed and partial passes", failingNamesPanel}

// failingNamesPanel lists the names failing now: TestDashboardFailingNames
// gives it rows.
const failingNamesPanel = "Failing names"

// The panel of failing names, as Grafana and the plugin send its query,
// with All schedules and with one selected: the names failing now, most
// passes in a row first, of the schedules selected only (All includes the
// backfills', under the empty schedule), and no name that recovered.
func TestDashboardFailingNames(t *testing.T) {
	t.Parallel()
	ch, db := historytest.OpenTestSink(t)
	writeRunsFixture(t, ch)
	writeDashboardFixture(t, ch)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	fail := func(nft string, at time.Time) sink.NameFailure {
		return sink.NameFailure{RunID: "r", SnapshotAt: at, NFT: nft, Stage: "details", Kind: "not_found", Attempts: 2, Error: "no project " + nft}
	}
	for _, b := range []*sink.Batch{
		{Schedule: "hourly", NameFailures: []sink.NameFailure{fail("o'neil.eth", now.Add(-2*time.Hour)), fail("o'neil.eth", now.Add(-time.Hour)), fail("gone.eth", now.Add(-2*time.Hour))},
			NameSuccesses: []sink.NameSuccess{{NFT: "gone.eth", SnapshotAt: now.Add(-time.Hour)}, {NFT: "fine.eth", SnapshotAt: now.Add(-time.Hour)}}},
		{Schedule: "daily", NameFailures: []sink.NameFailure{fail("daily.eth", now.Add(-time.Hour))}},
		{NameFailures: []sink.NameFailure{fail("backfilled.eth", now.Add(-time.Minute))}},
	} {
		if err := ch.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.RecordRun(ctx, sink.Run{RunID: "d", Schedule: "daily", Trigger: "cron", Status: "partial", SnapshotAt: now, StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	conn := db.OpenCurrent(t)
	d := loadDashboard(t)
	vars := dashboardVariables(t, conn, d)
	schedule := vars["schedule"]
	if schedule == nil || !slices.Contains(schedule.Options, grafanaOption{Text: "daily", Value: "daily"}) {
		t.Fatalf("the schedule variable: %+v, want an option for each schedule of sync_runs", schedule)
	}
	i := slices.IndexFunc(queryPanels(d), func(p panel) bool { return p.Title == failingNamesPanel })
	if i < 0 {
		t.Fatalf("the dashboard has no panel %q", failingNamesPanel)
	}
	p := queryPanels(d)[i]
	for _, sel := range []struct {
		current []string
		want    []string // schedule and name, in order
	}{
		{[]string{grafanaAllValue}, []string{"hourly o'neil.eth 2", " backfilled.eth 1", "daily daily.eth 1"}},
		{grafanaSelect(t, schedule, "daily"), []string{"daily daily.eth 1"}},
	} {
		selected := *schedule
		selected.Current = sel.current
		vars := maps.Clone(vars)
		vars["schedule"] = &selected
		sql := dashboardSQL(t, d, &p, p.Targets[0].RawSQL, vars)
		cols, rows, err := pluginRun(conn, sql)
		if err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s %s %s", grafanaText(r[slices.Index(cols, "schedule")]), grafanaText(r[slices.Index(cols, "nft_name")]),
				grafanaText(r[slices.Index(cols, "failing_passes")])))
		}
		if !slices.Equal(got, sel.want) {
			t.Errorf("schedule %v: rows %q, want %q\n%s", sel.current, got, sel.want, sql)
		}
	}
}

// TestDashboardQueries runs every query of the dashboard as Grafana and its
// ClickHouse plugin send it (grafana_test.go), on a database holding known
// rows: the project variable's options come from its own query by the
// plugin's rule; each panel runs with All selected and with selections of
// projects whose names need quoting. Every query must run, and every panel
// but those of failures must return rows: those of the selected projects,
// and of no other. A typo, a function 18.16 lacks, or a variable that holds
// names where the SQL wants ids fails here and not in front of a user.
func TestDashboardQueries(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	writeRunsFixture(t, ch)
	writeDashboardFixture(t, ch)
	conn := db.OpenCurrent(t)
	d := loadDashboard(t)
	vars := dashboardVariables(t, conn, d)

	// docs/dashboards.md promises a variable that shows nft names and holds ids.
	project := vars["project"]
	if project == nil {
		t.Fatal("the dashboard has no query variable named project")
	}
	for _, p := range dashboardProjects {
		want := grafanaOption{Text: p.nft, Value: strconv.FormatInt(p.id, 10)}
		if !slices.Contains(project.Options, want) {
			t.Fatalf("the project variable has no option %+v (text the nft name, value the id); it has %+v", want, project.Options)
		}
	}

	for _, sel := range []struct {
		name  string
		texts []string // nil: All
	}{
		{"All", nil},
		{"two projects", []string{dashboardProjects[2].nft, dashboardProjects[3].nft}},
		{"one project", []string{dashboardProjects[1].nft}},
	} {
		t.Run(sel.name, func(t *testing.T) {
			selected := *project
			selected.Current = []string{grafanaAllValue}
			want := sel.texts
			if sel.texts == nil {
				for _, o := range project.Options {
					want = append(want, o.Text)
				}
			} else {
				selected.Current = grafanaSelect(t, project, sel.texts...)
			}
			vars := dashboardVariablesWith(t, conn, d, map[string]*grafanaVariable{"project": &selected})
			for _, p := range queryPanels(d) {
				for _, tg := range p.Targets {
					t.Run(p.Title+"/"+tg.RefID, func(t *testing.T) {
						checkDashboardRows(t, conn, d, p, tg, vars, want)
					})
				}
			}
		})
	}

	// With All selected, the SQL must not list every project: thousands of
	// ids would make a query too large for ClickHouse.
	t.Run("All keeps the SQL small", func(t *testing.T) {
		all, many := *project, *project
		all.Current, many.Current = []string{grafanaAllValue}, []string{grafanaAllValue}
		many.Options = slices.Clone(project.Options)
		for i := range 10000 {
			many.Options = append(many.Options, grafanaOption{Text: fmt.Sprintf("p%d.eth", i), Value: strconv.Itoa(100000 + i)})
		}
		withAll, withMany := maps.Clone(vars), maps.Clone(vars)
		withAll["project"], withMany["project"] = &all, &many
		for _, p := range queryPanels(d) {
			for _, tg := range p.Targets {
				if a, m := dashboardSQL(t, d, &p, tg.RawSQL, withAll), dashboardSQL(t, d, &p, tg.RawSQL, withMany); a != m {
					t.Errorf("panel %q: with All selected its SQL grows with the projects (%d bytes for %d projects, %d for %d):\n%s",
						p.Title, len(a), len(all.Options), len(m), len(many.Options), a)
				}
			}
		}
	})
}

// checkDashboardRows runs a panel's query and checks its rows: some, but
// for a panel of failures; a column named time in a time series; and in a
// column nft, the projects of wantNFTs exactly.
func checkDashboardRows(t *testing.T, conn chgo.Conn, d *dashboard, p panel, tg target, vars map[string]*grafanaVariable, wantNFTs []string) {
	t.Helper()
	sql := dashboardSQL(t, d, &p, tg.RawSQL, vars)
	cols, rows, err := pluginRun(conn, sql)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	if len(rows) == 0 {
		if slices.Contains(dashboardFailurePanels, p.Title) {
			t.Logf("no rows: the panel lists failures")
			return
		}
		t.Fatalf("returned no rows from the fixture\n%s", sql)
	}
	if tg.Format != nil && *tg.Format == formatTimeSeries && !slices.Contains(cols, "time") {
		t.Errorf("a time series needs a column named time; columns %v", cols)
	}
	if i := slices.Index(cols, "nft"); i >= 0 {
		got := map[string]bool{}
		for _, r := range rows {
			got[grafanaText(r[i])] = true
		}
		if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(wantNFTs)); !slices.Equal(g, w) {
			t.Errorf("shows the projects %q, want %q\n%s", g, w, sql)
		}
	}
}

// grafanaSelect returns the values of the options of v whose texts are
// texts, as a selection in the drop-down gives them.
func grafanaSelect(t *testing.T, v *grafanaVariable, texts ...string) []string {
	t.Helper()
	var out []string
	for _, text := range texts {
		i := slices.IndexFunc(v.Options, func(o grafanaOption) bool { return o.Text == text })
		if i < 0 {
			t.Fatalf("no option shows %q; options %+v", text, v.Options)
		}
		out = append(out, v.Options[i].Value)
	}
	return out
}

// dashboardVariables returns the dashboard's query variables as Grafana
// fills them: each one's query run as the plugin runs it, in the
// dashboard's time range and with the variables before it, and its result
// made options by the plugin's rule; each holds its saved selection.
func dashboardVariables(t *testing.T, conn chgo.Conn, d *dashboard) map[string]*grafanaVariable {
	t.Helper()
	return dashboardVariablesWith(t, conn, d, nil)
}

// dashboardVariablesWith is dashboardVariables with the variables of set
// as they are there, selected by a user: Grafana then refreshes the
// variables whose queries read them, in the dashboard's order, as this
// runs every query after them again.
func dashboardVariablesWith(t *testing.T, conn chgo.Conn, d *dashboard, set map[string]*grafanaVariable) map[string]*grafanaVariable {
	t.Helper()
	vars := map[string]*grafanaVariable{}
	for _, v := range d.Templating.List {
		if s, ok := set[v.Name]; ok {
			vars[v.Name] = s
			continue
		}
		switch v.Type {
		case "datasource":
			continue // names the data source; no SQL uses it
		case "query":
		default:
			// An ad hoc filter, say, would make the plugin add filters.
			t.Fatalf("variable %s is of type %s, which the model of Grafana here does not know", v.Name, v.Type)
		}
		if v.AllValue != "" {
			t.Fatalf("variable %s has a custom all value, which the model of Grafana here does not know", v.Name)
		}
		sql := dashboardSQL(t, d, nil, variableSQL(t, v), vars)
		_, rows, err := pluginRun(conn, sql)
		if err != nil {
			t.Fatalf("variable %s: %v\n%s", v.Name, err, sql)
		}
		texts := make([][]string, len(rows))
		for i, r := range rows {
			for _, c := range r {
				texts[i] = append(texts[i], grafanaText(c))
			}
		}
		options := pluginVariableOptions(texts)
		if len(options) == 0 && !v.IncludeAll {
			t.Fatalf("variable %s: its query returned no options\n%s", v.Name, sql)
		}
		var current []string
		if err := json.Unmarshal(v.Current.Value, &current); err != nil {
			var one string
			if err := json.Unmarshal(v.Current.Value, &one); err != nil {
				t.Fatalf("variable %s: current value %s is neither a string nor a list of them", v.Name, v.Current.Value)
			}
			current = []string{one}
		}
		// A variable of one value whose value is not among its options
		// takes the first (Grafana's validateVariableSelectionState).
		if !v.Multi && !v.IncludeAll && len(options) > 0 && !slices.ContainsFunc(options, func(o grafanaOption) bool { return len(current) == 1 && o.Value == current[0] }) {
			current = []string{options[0].Value}
		}
		vars[v.Name] = &grafanaVariable{Multi: v.Multi, Options: options, Current: current}
	}
	return vars
}

// dashboardSQL returns rawSQL as ClickHouse receives it from a query of
// panel p (nil: a variable's query) with the variables vars, the dashboard
// open at dashboardNow.
func dashboardSQL(t *testing.T, d *dashboard, p *panel, rawSQL string, vars map[string]*grafanaVariable) string {
	t.Helper()
	what := "variable query"
	if p != nil {
		what = fmt.Sprintf("panel %q", p.Title)
	}
	sql, err := pluginApplyTemplateVariables(rawSQL, vars)
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, rawSQL)
	}
	q, err := dashboardPluginQuery(d, p)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if sql, err = pluginExpandMacros(sql, q); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, rawSQL)
	}
	return sql
}

// dashboardPluginQuery returns the time range and interval that Grafana
// gives a query of panel p (nil: a variable's query) at dashboardNow: the
// dashboard's range, or the panel's relative time (timeFrom), which ends
// now; an interval of the range over the points a panel draws (its width in
// pixels, about 1000; Grafana rounds it), at least the panel's minimum.
func dashboardPluginQuery(d *dashboard, p *panel) (pluginQuery, error) {
	from, err := grafanaRelativeTime(d.Time.From)
	if err != nil {
		return pluginQuery{}, fmt.Errorf("dashboard time from: %w", err)
	}
	to, err := grafanaRelativeTime(d.Time.To)
	if err != nil {
		return pluginQuery{}, fmt.Errorf("dashboard time to: %w", err)
	}
	q := pluginQuery{From: from, To: to}
	var minInterval time.Duration
	if p != nil {
		if p.TimeShift != "" {
			return pluginQuery{}, fmt.Errorf("timeShift %q: the model of Grafana here knows no time shift", p.TimeShift)
		}
		if p.TimeFrom != "" {
			span, err := grafanaDuration(p.TimeFrom)
			if err != nil {
				return pluginQuery{}, fmt.Errorf("timeFrom: %w", err)
			}
			q.From, q.To = dashboardNow.Add(-span), dashboardNow
		}
		if p.Interval != "" {
			if minInterval, err = grafanaDuration(p.Interval); err != nil {
				return pluginQuery{}, fmt.Errorf("interval: %w", err)
			}
		}
	}
	q.Interval = max(q.To.Sub(q.From)/1000, minInterval)
	return q, nil
}

var (
	grafanaRelative   = regexp.MustCompile(`^now(?:-(\d+[smhdw]))?$`)
	grafanaDurationRe = regexp.MustCompile(`^(\d+)([smhdw])$`)
)

// grafanaRelativeTime returns a time such as "now-30d" at dashboardNow.
func grafanaRelativeTime(s string) (time.Time, error) {
	m := grafanaRelative.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, fmt.Errorf("%q: the model of Grafana here knows now and now-<n><unit> only", s)
	}
	if m[1] == "" {
		return dashboardNow, nil
	}
	d, err := grafanaDuration(m[1])
	return dashboardNow.Add(-d), err
}

// grafanaDuration parses a duration such as "2d" or "1h".
func grafanaDuration(s string) (time.Duration, error) {
	m := grafanaDurationRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q: the model of Grafana here knows <n><unit> only, unit one of s, m, h, d, w", s)
	}
	n, err := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[2]]
	return time.Duration(n) * unit, err
}

// writeRunsFixture records passes of every status in the dashboard's test
// time range.
func writeRunsFixture(t *testing.T, ch *clickhouse.ClickHouse) {
	t.Helper()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i, r := range []sink.Run{
		{Schedule: "hourly", Trigger: "cron", NFTTotal: 2, NFTOK: 2, Status: "ok"},
		{Schedule: "hourly", Trigger: "cron", NFTTotal: 2, NFTOK: 1, NFTFailed: 1, Status: "partial", Error: "nobody.eth: upstream reported failure"},
		{Schedule: "", Trigger: "backfill", NFTTotal: 3, NFTFailed: 3, Status: "failed", Error: "3 of 3 names failed"},
	} {
		r.RunID = fmt.Sprintf("run-%d", i)
		r.SnapshotAt = at.Add(time.Duration(i) * time.Hour)
		r.StartedAt, r.FinishedAt = r.SnapshotAt, r.SnapshotAt.Add(time.Minute)
		if err := ch.RecordRun(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// writeDashboardFixture writes the history of dashboardProjects: two passes
// of schedule hourly, on March 1 and 2, with a tick missed between them, so
// that every read panel has rows for every project (the gains panels a day
// whose gain spans the missed tick). Each project has two messages.
func writeDashboardFixture(t *testing.T, ch *clickhouse.ClickHouse) {
	t.Helper()
	ctx := context.Background()
	passes := []time.Time{time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)}
	missed := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	// The ticks first: a pass's gains count the ticks recorded before it.
	runs := []sink.Run{{RunID: "missed", SnapshotAt: missed, StartedAt: missed, FinishedAt: missed, Status: "missed"}}
	for i, at := range passes {
		runs = append(runs, sink.Run{RunID: fmt.Sprintf("pass-%d", i), SnapshotAt: at, StartedAt: at, FinishedAt: at.Add(time.Minute),
			NFTTotal: uint64(len(dashboardProjects)), NFTOK: uint64(len(dashboardProjects)), Status: "ok"})
	}
	for _, r := range runs {
		r.Schedule, r.Trigger = "hourly", "cron"
		if err := ch.RecordRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i, at := range passes {
		ts := sink.TimeOf(at)
		b := sink.Batch{Schedule: "hourly"}
		for _, p := range dashboardProjects {
			v := uint64(100*i) + uint64(p.id)
			b.Projects = append(b.Projects, sink.Project{ID: p.id, NFT: p.nft, Name: p.name, CreateAt: ts, Raw: "{}", FetchedAt: ts, Version: v})
			for m := int64(1); m <= 2; m++ {
				id := 10*p.id + m
				reads := uint64((i + 1) * int(id))
				// Created two hours before the first pass: its reads at 2
				// and 26 hours of age.
				b.Messages = append(b.Messages, sink.Message{ProjectID: p.id, ID: id, Subject: fmt.Sprintf("message %d", id),
					CreateAt: sink.TimeOf(passes[0].Add(-2 * time.Hour)), FetchedAt: ts, Version: v})
				b.Snapshots = append(b.Snapshots, sink.Snapshot{ProjectID: p.id, MessageID: id, SnapshotAt: ts, FetchedAt: ts,
					ReadCount: reads, Total: 100, Percent: float64(reads), Version: v})
			}
		}
		if err := ch.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
}

func variableSQL(t *testing.T, v variable) string {
	t.Helper()
	var q struct {
		RawSQL string `json:"rawSql"`
	}
	if err := json.Unmarshal(v.Query, &q); err != nil {
		t.Fatalf("variable %s: query is not the plugin's {\"rawSql\": ...}: %v", v.Name, err)
	}
	return q.RawSQL
}

// The per-snapshot panel over a range whose raw rows expired, as Grafana
// and the plugin send it: the raw_from variable reads where the kept raw
// rows start, and the panel shows each project's hours from
// project_read_hourly there, as many points as that view holds in the
// range, each on the hour.
func TestDashboardReadsHoursWhereRawExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ch, db := historytest.OpenTestSink(t)
	writeDashboardFixture(t, ch)
	if _, err := ch.Expire(ctx, expiry.Policy{schema.Raw: 30 * 24 * time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	conn := db.OpenCurrent(t)
	d := loadDashboard(t)
	vars := dashboardVariables(t, conn, d)
	if from := vars["raw_from"]; from == nil || len(from.Current) != 1 || from.Current[0] == "0" {
		t.Fatalf("raw_from after the raw rows expired: %+v, want the edge", from)
	}
	var raw, hours uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db.Table("project_read_snapshots")).Scan(&raw); err != nil || raw != 0 {
		t.Fatalf("project_read_snapshots holds %d rows after the raw rows expired (%v)", raw, err)
	}
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s WHERE hour >= toDateTime(%d) AND hour <= toDateTime(%d)",
		db.Table("project_read_hourly"), dashboardNow.Add(-48*time.Hour).Unix(), dashboardNow.Unix())).Scan(&hours); err != nil || hours == 0 {
		t.Fatalf("project_read_hourly holds %d rows in the panel's range (%v): the fixture is wrong", hours, err)
	}
	for _, p := range queryPanels(d) {
		if p.Title != "Read rate per project at each snapshot" {
			continue
		}
		sql := dashboardSQL(t, d, &p, p.Targets[0].RawSQL, vars)
		cols, rows, err := pluginRun(conn, sql)
		if err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
		if uint64(len(rows)) != hours || cols[0] != "time" {
			t.Fatalf("the panel shows %d points (columns %v), want the %d hours of project_read_hourly in its range\n%s", len(rows), cols, hours, sql)
		}
		for _, r := range rows {
			if at, ok := r[0].(time.Time); !ok || at.Unix()%3600 != 0 {
				t.Errorf("point at %v, want one on the hour", r[0])
			}
		}
		return
	}
	t.Fatal("no panel of the read rate at each snapshot")
}
