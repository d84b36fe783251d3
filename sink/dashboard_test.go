package sink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/sinktest"
)

const (
	dashboardFile  = "../deployments/grafana/readsync.json"
	datasourceType = "grafana-clickhouse-datasource"
	datasourceUID  = "${datasource}"
	// Grafana's ClickHouse plugin: format 0 is a time series (which needs
	// a column named time), 1 a table.
	formatTimeSeries = 0
	formatTable      = 1
)

// The parts of a Grafana dashboard the tests look at.
type (
	dashboard struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
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
	}
	panel struct {
		ID         int            `json:"id"`
		Title      string         `json:"title"`
		Type       string         `json:"type"`
		Datasource *datasourceRef `json:"datasource"`
		Targets    []target       `json:"targets"`
		Panels     []panel        `json:"panels"` // a collapsed row's
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
	"message_read_latest", "project_read_daily", "project_read_snapshots", "schedule_coverage", "project_read_gains", "project_read_daily_gains"}

var fromIdent = regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+([A-Za-z_][A-Za-z0-9_.]*)`)

func TestDashboardStructure(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title (uid %q, title %q)", d.UID, d.Title)
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
			if want := map[string]int{"timeseries": formatTimeSeries, "table": formatTable}[p.Type]; tg.Format != nil && *tg.Format != want {
				t.Errorf("panel %q (%s) query %s has format %d, want %d", p.Title, p.Type, tg.RefID, *tg.Format, want)
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
		"project_read_daily_gains"} {
		if !read[want] {
			t.Errorf("no panel reads %s", want)
		}
	}
}

// TestDashboardQueries runs every panel's and variable's SQL, with the
// plugin's macros and the variables replaced as Grafana would, against a
// database holding known rows. Each must run and return rows, so a typo
// or a function 18.16 lacks fails here and not in front of a user.
func TestDashboardQueries(t *testing.T) {
	ch, db := openTestSink(t)
	writeViewFixture(t, ch)
	writeRunsFixture(t, ch)
	writeMissedTickFixture(t, ch)
	conn := openDatabase(t, db)

	env := grafanaEnv{
		from:     time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		to:       time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC),
		interval: time.Hour,
		// The project variable's values are project ids; its texts, the
		// nft names.
		vars: map[string][]string{"project": {"1", "2"}},
	}
	d := loadDashboard(t)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		t.Run("variable "+v.Name, func(t *testing.T) {
			cols, n := runQuery(t, conn, env.expand(t, variableSQL(t, v)))
			if n == 0 || len(cols) == 0 {
				t.Errorf("returned no values")
			}
		})
	}
	for _, p := range queryPanels(d) {
		for _, tg := range p.Targets {
			t.Run(p.Title+"/"+tg.RefID, func(t *testing.T) {
				cols, n := runQuery(t, conn, env.expand(t, tg.RawSQL))
				if n == 0 {
					t.Errorf("returned no rows from the fixture")
				}
				if tg.Format != nil && *tg.Format == formatTimeSeries && !slices.Contains(cols, "time") {
					t.Errorf("a time series needs a column named time; columns %v", cols)
				}
			})
		}
	}
}

// writeRunsFixture records passes of every status in the dashboard's test
// time range.
func writeRunsFixture(t *testing.T, ch *sink.ClickHouse) {
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

// writeMissedTickFixture records a tick of schedule hourly that readsync
// missed between project 2's two snapshots, then fetches the second one
// again in a pass of that schedule: its gain spans the missed tick.
func writeMissedTickFixture(t *testing.T, ch *sink.ClickHouse) {
	t.Helper()
	ctx := context.Background()
	missed := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	if err := ch.RecordRun(ctx, sink.Run{RunID: "missed", Schedule: "hourly", Trigger: "cron", SnapshotAt: missed, StartedAt: missed,
		FinishedAt: missed, Status: "missed"}); err != nil {
		t.Fatal(err)
	}
	at := sink.TimeOf(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	b := sink.Batch{Schedule: "hourly", Snapshots: []sink.Snapshot{{ProjectID: 2, MessageID: 20, SnapshotAt: at, ReadCount: 3, Total: 5,
		Percent: 60, FetchedAt: at, Version: 9}}}
	if err := ch.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
}

// openDatabase connects with the test database as the current one, as a
// Grafana data source names its database: the dashboard's SQL names
// tables without one.
func openDatabase(t *testing.T, db *sinktest.DB) clickhouse.Conn {
	t.Helper()
	opts, err := clickhouse.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func runQuery(t *testing.T, conn clickhouse.Conn, sql string) (columns []string, rows int) {
	t.Helper()
	r, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	defer r.Close()
	for r.Next() {
		rows++
	}
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return r.Columns(), rows
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

// grafanaEnv stands in for a dashboard's time range, interval and
// variable values.
type grafanaEnv struct {
	from, to time.Time
	interval time.Duration
	vars     map[string][]string
}

var (
	macroRe    = regexp.MustCompile(`\$__(\w+)(?:\(([^)]*)\))?`)
	variableRe = regexp.MustCompile(`\$\{(\w+)(?::(\w+))?\}|\$(\w+)`)
)

// expand replaces the ClickHouse plugin's macros the way its backend does
// (pkg/macros in grafana/clickhouse-datasource) and variables with
// Grafana's formats. Anything it does not know fails the test rather than
// reach ClickHouse unreplaced.
func (e grafanaEnv) expand(t *testing.T, sql string) string {
	t.Helper()
	dt := func(tm time.Time) string { return fmt.Sprintf("toDateTime(%d)", tm.Unix()) }
	date := func(tm time.Time) string { return fmt.Sprintf("toDate('%s')", tm.UTC().Format(time.DateOnly)) }
	sql = macroRe.ReplaceAllStringFunc(sql, func(m string) string {
		sub := macroRe.FindStringSubmatch(m)
		name, arg := sub[1], strings.TrimSpace(sub[2])
		switch name {
		case "timeFilter":
			return fmt.Sprintf("%s >= %s AND %s <= %s", arg, dt(e.from), arg, dt(e.to))
		case "dateFilter":
			return fmt.Sprintf("%s >= %s AND %s <= %s", arg, date(e.from), arg, date(e.to))
		case "fromTime":
			return dt(e.from)
		case "toTime":
			return dt(e.to)
		case "interval_s":
			return strconv.Itoa(int(max(e.interval.Seconds(), 1)))
		case "timeInterval":
			return fmt.Sprintf("toStartOfInterval(toDateTime(%s), INTERVAL %d second)", arg, int(max(e.interval.Seconds(), 1)))
		}
		t.Fatalf("macro %s: this test does not know it; teach grafanaEnv.expand", m)
		return ""
	})
	return variableRe.ReplaceAllStringFunc(sql, func(m string) string {
		sub := variableRe.FindStringSubmatch(m)
		name, format := sub[1]+sub[3], sub[2]
		values, ok := e.vars[name]
		if !ok {
			t.Fatalf("variable %s is not defined for this test", m)
		}
		// Only an explicit format: the plugin's default for multiple
		// values is not one to rely on.
		switch format {
		case "csv":
			return strings.Join(values, ",")
		case "singlequote":
		default:
			t.Fatalf("%s: write multi-value variables as ${%s:singlequote} or ${%s:csv}", m, name, name)
		}
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = "'" + strings.ReplaceAll(v, "'", `\'`) + "'"
		}
		return strings.Join(quoted, ",")
	})
}
