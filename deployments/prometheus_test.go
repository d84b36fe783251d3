package deployments_test

// The shipped alerts in a real Prometheus: it scrapes a readsync daemon,
// running as a process of its own, through an upstream outage, a ClickHouse
// outage and a restart, and the test reads from Prometheus's API which
// alerts fired. The rules' thresholds are hours; the Prometheus here loads
// them on a faster clock (scaledRules), so that the whole story takes
// seconds.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/intstr"
	kyaml "sigs.k8s.io/yaml"

	"github.com/readsync/readsync/apiclient/apitest"
	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/app"
	"github.com/readsync/readsync/internal/apptest"
)

const (
	// timeScale divides every duration of the rules Prometheus loads in
	// the end-to-end test: an hour becomes 3 seconds, the shortest window
	// (10m) 500ms.
	timeScale = 1200
	// promInterval is the scrape and evaluation interval there: five
	// samples within the shortest window.
	promInterval = 100 * time.Millisecond
)

var (
	// rangeSelector finds the durations of an expression: range
	// selectors and subqueries, which start with a number and its unit
	// (a character class of a regular expression, [0-9], does not).
	rangeSelector = regexp.MustCompile(`\[([0-9]+[a-z][^\]]*)\]`)
	// wholeNumber finds the numbers of an expression: those that are
	// whole hours are durations in seconds, as time() counts.
	wholeNumber = regexp.MustCompile(`\b[0-9]+\b`)
)

// scaledRules returns the rules with every duration divided by factor: the
// range selectors and the for of each rule, and the whole hours the
// expressions write in seconds (3600, 7200). It is a mechanical rewrite, so that the rules
// Prometheus runs are the shipped ones on a faster clock; it fails on a
// duration it cannot scale exactly, or on a subquery.
func scaledRules(spec monitoringv1.PrometheusRuleSpec, factor int64) (monitoringv1.PrometheusRuleSpec, error) {
	scale := func(s string) (string, error) {
		d, err := model.ParseDuration(s)
		if err != nil {
			return "", err
		}
		if time.Duration(d)%(time.Duration(factor)*time.Millisecond) != 0 {
			return "", fmt.Errorf("%s divided by %d is not a whole number of milliseconds", s, factor)
		}
		return (d / model.Duration(factor)).String(), nil
	}
	out := *spec.DeepCopy()
	for gi := range out.Groups {
		for ri := range out.Groups[gi].Rules {
			r := &out.Groups[gi].Rules[ri]
			if r.For != nil {
				d, err := scale(string(*r.For))
				if err != nil {
					return out, fmt.Errorf("%s: for: %w", r.Alert, err)
				}
				*r.For = monitoringv1.Duration(d)
			}
			var errs []error
			expr := rangeSelector.ReplaceAllStringFunc(r.Expr.String(), func(sel string) string {
				d, err := scale(sel[1 : len(sel)-1])
				if err != nil {
					errs = append(errs, fmt.Errorf("range %s: %w", sel, err))
				}
				return "[" + d + "]"
			})
			if err := errors.Join(errs...); err != nil {
				return out, fmt.Errorf("%s: %w", r.Alert, err)
			}
			if 3600%factor != 0 {
				return out, fmt.Errorf("%s: an hour divided by %d is not a whole number of seconds", r.Alert, factor)
			}
			expr = wholeNumber.ReplaceAllStringFunc(expr, func(n string) string {
				v, err := strconv.ParseInt(n, 10, 64)
				if err != nil || v == 0 || v%3600 != 0 {
					return n
				}
				return strconv.FormatInt(v/factor, 10)
			})
			r.Expr.StrVal = expr
		}
	}
	return out, nil
}

// The rewrite scales what it should, and refuses what it cannot scale.
func TestScaledRules(t *testing.T) {
	rule := func(expr, forDuration string) monitoringv1.PrometheusRuleSpec {
		r := monitoringv1.Rule{Alert: "A", Expr: intstr.FromString(expr)}
		if forDuration != "" {
			d := monitoringv1.Duration(forDuration)
			r.For = &d
		}
		return monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{Name: "g", Rules: []monitoringv1.Rule{r}}}}
	}
	got, err := scaledRules(rule(`increase(x[3h]) > 0 unless time() - y > 2 * 3600 and time() - w > 7200 and deriv(z{a="[1h]"}[30m]) > 0.3`, "10m"), 1200)
	if err != nil {
		t.Fatal(err)
	}
	r := got.Groups[0].Rules[0]
	if want := `increase(x[9s]) > 0 unless time() - y > 2 * 3 and time() - w > 6 and deriv(z{a="[3s]"}[1s500ms]) > 0.3`; r.Expr.String() != want || *r.For != "500ms" {
		t.Errorf("scaled: %q for %s, want %q for 500ms", r.Expr.String(), *r.For, want)
	}
	for _, bad := range []monitoringv1.PrometheusRuleSpec{rule("x[1h:5m]", ""), rule("x", "1ms"), rule("x[1s]", "")} {
		if _, err := scaledRules(bad, 1200); err == nil {
			t.Errorf("%q for %v: scaled without error", bad.Groups[0].Rules[0].Expr.String(), bad.Groups[0].Rules[0].For)
		}
	}
}

// promServer is a Prometheus server a test started.
type promServer struct {
	t    *testing.T
	proc *apptest.Process
	base string
}

// startPrometheus starts a Prometheus on a free loopback port that scrapes
// target as job readsync and evaluates rules, both every promInterval.
func startPrometheus(t *testing.T, rules monitoringv1.PrometheusRuleSpec, target string) *promServer {
	t.Helper()
	bin := deploytest.ToolPath(t, prometheusTool)
	dir := t.TempDir()
	doc, err := kyaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	apptest.WriteFile(t, filepath.Join(dir, "rules.yaml"), string(doc))
	apptest.WriteFile(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: readsync
    static_configs:
      - targets: [%[2]q]
`, model.Duration(promInterval), target))
	addr := freeLoopbackAddr(t)
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	p := &promServer{t: t, proc: apptest.StartProcess(t, "prometheus", cmd), base: "http://" + addr}
	apptest.Eventually(t, "Prometheus ready", func() bool {
		if p.proc.Exited() {
			t.Fatalf("prometheus exited with %d:\n%s", p.proc.Wait(), p.proc.Log.String())
		}
		code, _, err := tryGet(p.base + "/-/ready")
		return err == nil && code == http.StatusOK
	}, p.proc.Log.String)
	return p
}

// freeLoopbackAddr returns a loopback address with a port free now, for a
// server that must be told its address before it starts. Another process
// may take the port meanwhile: the server then exits saying so, and the
// test fails with its output.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// passesTotal finds the counts of passes in /metrics.
var passesTotal = regexp.MustCompile(`(?m)^readsync_passes_total\{[^}]*\} (\d+)$`)

// afterPass returns once the daemon at base has finished a pass, its run
// record written: a moment when it sends ClickHouse nothing, to cut the
// connection at. The current release's test server does not survive a
// connection cut in the middle of a statement.
func afterPass(t *testing.T, base string, log func() string) {
	t.Helper()
	passes := func() int {
		_, m := apptest.Get(t, base, "/metrics")
		n := 0
		for _, c := range passesTotal.FindAllStringSubmatch(m, -1) {
			v, _ := strconv.Atoi(c[1])
			n += v
		}
		return n
	}
	before := passes()
	apptest.Eventually(t, "a pass finished", func() bool { return passes() > before }, log)
}

// tryGet fetches a URL, giving up after ten seconds.
func tryGet(u string) (int, []byte, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// api returns the data of a Prometheus API answer.
func (p *promServer) api(path string, query url.Values, data any) {
	p.t.Helper()
	code, b, err := tryGet(p.base + path + "?" + query.Encode())
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	var answer struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &answer); err != nil || answer.Status != "success" {
		p.t.Fatalf("GET %s?%s: %d %v %s", path, query.Encode(), code, err, b)
	}
	if err := json.Unmarshal(answer.Data, data); err != nil {
		p.t.Fatalf("GET %s: %v: %s", path, err, answer.Data)
	}
}

// query evaluates an instant query at at and returns each series' value by
// the value of its label label.
func (p *promServer) query(q string, at time.Time, label string) map[string]float64 {
	p.t.Helper()
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	p.api("/api/v1/query", url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}, &data)
	out := map[string]float64{}
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			p.t.Fatalf("%s: value %v: %v", q, r.Value, err)
		}
		out[r.Metric[label]] = v
	}
	return out
}

// alertRule is an alerting rule's state, as /api/v1/rules reports it.
type alertRule struct {
	Name           string    `json:"name"`
	State          string    `json:"state"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// rules returns the alerting rules' states by alert name.
func (p *promServer) rules() map[string]alertRule {
	p.t.Helper()
	var data struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	p.api("/api/v1/rules", url.Values{"type": {"alert"}}, &data)
	out := map[string]alertRule{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r
		}
	}
	return out
}

// fired returns the alerts that fired at any evaluation after from and up
// to to, from the ALERTS series Prometheus writes at each: an alert firing
// between two looks at /api/v1/rules counts too.
func (p *promServer) fired(from, to time.Time) []string {
	p.t.Helper()
	window := model.Duration(to.Sub(from).Truncate(time.Millisecond))
	if window <= 0 {
		return nil
	}
	q := fmt.Sprintf(`count by (alertname) (count_over_time(ALERTS{alertstate="firing"}[%s]))`, window)
	return slices.Sorted(maps.Keys(p.query(q, to, "alertname")))
}

// waitFired waits until each of alerts has fired since from.
func (p *promServer) waitFired(from time.Time, log func() string, alerts ...string) {
	p.t.Helper()
	apptest.Eventually(p.t, fmt.Sprintf("%v firing", alerts), func() bool {
		fired := p.fired(from, time.Now())
		return !slices.ContainsFunc(alerts, func(a string) bool { return !slices.Contains(fired, a) })
	}, func() string { return fmt.Sprintf("fired since: %v\nreadsync:\n%s", p.fired(from, time.Now()), log()) })
}

// onlyFired checks that no alert but those fired since from, and that every
// rule evaluates without error.
func (p *promServer) onlyFired(from time.Time, what string, alerts ...string) {
	p.t.Helper()
	for _, a := range p.fired(from, time.Now()) {
		if !slices.Contains(alerts, a) {
			p.t.Errorf("%s: %s fired; want only %v", what, a, alerts)
		}
	}
	for _, r := range p.rules() {
		if r.Health != "ok" || r.LastError != "" {
			p.t.Errorf("%s: rule %s: health %q, error %q", what, r.Name, r.Health, r.LastError)
		}
	}
}

// Prometheus, running the shipped rules on a faster clock against a daemon:
// from the start through an upstream outage, the upstream's alerts and the
// one on clean passes fire, and not the one on deliveries; in a ClickHouse
// outage, the spool's and the one on deliveries, and not the one on
// refusals; and a restart into both outages fires neither timestamp alert
// until the new process is older than their threshold, though its
// timestamps are 0 from its start.
func TestAlertsInPrometheus(t *testing.T) {
	deploytest.ToolPath(t, prometheusTool) // skip before starting anything
	rules, err := scaledRules(shippedRules(t), timeScale)
	if err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	names := alertNames(rules)
	alerts := func(want ...string) []string {
		for _, a := range want {
			if !slices.Contains(names, a) {
				t.Fatalf("%s has no alert %s", rulesFile, a)
			}
		}
		return want
	}
	var (
		upstreamDown   = alerts("ReadsyncNamesFailing", "ReadsyncNamesNotRead", "ReadsyncUpstreamDegraded", "ReadsyncUpstreamDown", "ReadsyncNoSuccessfulPass")
		clickhouseDown = alerts("ReadsyncSpoolGrowing", "ReadsyncNothingDelivered")
		timestamps     = alerts("ReadsyncNoSuccessfulPass", "ReadsyncNothingDelivered")
		// The threshold of both timestamp alerts, scaled.
		threshold = 2 * time.Hour / timeScale
	)

	// More names than it takes to trip the breaker.
	projects := apitest.Generate(6, 2, 51)
	f := apptest.NewFixture(t, apptest.NamesOf(projects), apitest.WithProjects(projects...))
	proxy := f.DB.NewProxy(t)
	f.Env["READSYNC_CLICKHOUSE_DSN"] = proxy.DSN
	f.Env["READSYNC_SHUTDOWN_GRACE"] = "1s"
	f.WriteSchedules(t, "fast", "@every 1s", apptest.NamesOf(projects))
	upstream := func(down bool) {
		for _, n := range apptest.NamesOf(projects) {
			fault := apitest.Fault{}
			if down {
				fault = apitest.StatusFault(503, "<html>maintenance</html>")
			}
			f.Srv.SetFault(n, fault)
		}
	}

	// Prometheus first: it scrapes a new target only some seconds after it
	// starts, which the first phase outlasts.
	f.Env["READSYNC_HTTP_ADDR"] = freeLoopbackAddr(t) // the restart listens there too
	prom := startPrometheus(t, rules, f.Env["READSYNC_HTTP_ADDR"])
	begin := time.Now()
	first := f.StartReadsync(t)
	apptest.Eventually(t, "a clean pass", func() bool {
		if first.Exited() {
			t.Fatalf("readsync exited with %d", first.Wait())
		}
		code, b, err := tryGet("http://" + f.Env["READSYNC_HTTP_ADDR"] + "/metrics")
		return err == nil && code == http.StatusOK && apptest.PassedOK(string(b), "fast")
	}, first.Log.String)

	// The upstream answers 503 to every name.
	upstream(true)
	outage := time.Now()
	prom.waitFired(outage, first.Log.String, upstreamDown...)
	prom.onlyFired(begin, "start and upstream outage (the run records still reach ClickHouse)", upstreamDown...)

	// The upstream is back and ClickHouse goes away: the passes are clean
	// again, their rows spooled. Once the upstream's alerts have resolved,
	// only ClickHouse's fire.
	upstream(false)
	afterPass(t, "http://"+f.Env["READSYNC_HTTP_ADDR"], first.Log.String)
	proxy.Down()
	apptest.Eventually(t, "the upstream's alerts resolved", func() bool {
		rs := prom.rules()
		return !slices.ContainsFunc(upstreamDown, func(a string) bool { return rs[a].State != "inactive" })
	}, first.Log.String)
	outage = time.Now()
	prom.waitFired(outage, first.Log.String, clickhouseDown...)
	prom.onlyFired(outage, "ClickHouse outage (no refusal)", clickhouseDown...)

	// Restarted into both outages, the new process has neither a clean pass
	// nor a delivery: its timestamps are 0.
	upstream(true)
	before := prom.query("process_start_time_seconds", time.Now(), "job")["readsync"]
	if code := first.Stop(t); code != app.ExitOK {
		t.Errorf("readsync exit %d; log:\n%s", code, first.Log.String())
	}
	second := f.StartReadsync(t)
	var started float64
	apptest.Eventually(t, "the new process scraped", func() bool {
		started = prom.query("process_start_time_seconds", time.Now(), "job")["readsync"]
		return started > before
	}, second.Log.String)
	restarted := time.Now()
	if got := prom.query("readsync_last_success_timestamp_seconds == 0 and ignoring (schedule) readsync_last_delivery_timestamp_seconds == 0", time.Now(), "job"); len(got) != 1 {
		t.Errorf("the new process's timestamps are not both 0: the restart proves nothing")
	}
	// Quiet while the process is younger than the threshold...
	guardEnd := time.UnixMilli(int64(started * 1000)).Add(threshold - promInterval)
	apptest.Eventually(t, "the rules evaluated past the new process's guard", func() bool {
		return !slices.ContainsFunc(slices.Collect(maps.Values(prom.rules())), func(r alertRule) bool { return r.LastEvaluation.Before(guardEnd) })
	}, second.Log.String)
	for _, a := range prom.fired(restarted, guardEnd) {
		if slices.Contains(timestamps, a) {
			t.Errorf("%s fired within %s of the restart", a, threshold)
		}
	}
	// ...and firing once it is older: the guard delays them, it does not
	// mute them.
	prom.waitFired(guardEnd, second.Log.String, timestamps...)
	prom.onlyFired(guardEnd, "after the restart", slices.Concat(upstreamDown, clickhouseDown)...)
	if code := second.Stop(t); code != app.ExitOK {
		t.Errorf("readsync exit %d after the restart; log:\n%s", code, second.Log.String())
	}
}
