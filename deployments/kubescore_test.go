package deployments_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/readsync/readsync/deployments/deploytest"
	"github.com/readsync/readsync/internal/apptest"
)

var kubeScoreTool = deploytest.NewTool("kube-score", "READSYNC_REQUIRE_KUBESCORE", "version")

// kube-score's grades (its scorecard package): what it reports as a
// warning or worse.
const kubeScoreWarning = 5

// kube-score finds in the chart's output nothing but what the chart's
// README explains, with its defaults and with every optional object; and
// the README explains nothing that kube-score no longer finds.
func TestChartKubeScore(t *testing.T) {
	explained := kubeScoreExplained(t)
	found := map[string]bool{}
	for _, flags := range [][]string{nil, append(slices.Clone(chartEverything), "--set", "replicaCount=3")} {
		args := append([]string{"template", "readsync", deploytest.Chart, "--namespace", "readsync", "--set", "image.repository=" + deploytest.Image}, flags...)
		rendered := filepath.Join(t.TempDir(), "rendered.yaml")
		apptest.WriteFile(t, rendered, string(deploytest.Run(t, deploytest.Helm, "", args...)))
		// kube-score exits 1 when it finds something critical, and says
		// what in its report all the same.
		out, err := deploytest.Output(t, kubeScoreTool, "", "score", "--output-format", "json", rendered)
		var report []struct {
			ObjectName string                `json:"object_name"`
			TypeMeta   struct{ Kind string } `json:"type_meta"`
			Checks     []struct {
				Check    struct{ ID string }
				Grade    int
				Skipped  bool
				Comments []struct{ Summary string }
			}
		}
		if jerr := json.Unmarshal(out, &report); jerr != nil || len(report) == 0 {
			t.Fatalf("kube-score on helm %s: %v (%v)\n%s", strings.Join(args, " "), jerr, err, out)
		}
		for _, o := range report {
			for _, c := range o.Checks {
				if c.Skipped || c.Grade > kubeScoreWarning {
					continue
				}
				found[c.Check.ID] = true
				if !explained[c.Check.ID] {
					t.Errorf("helm %s: kube-score check %s finds %s %s: %v; fix it, or explain it in %s/README.md",
						strings.Join(args, " "), c.Check.ID, o.TypeMeta.Kind, o.ObjectName, c.Comments, deploytest.Chart)
				}
			}
		}
	}
	for id := range explained {
		if !found[id] {
			t.Errorf("%s/README.md explains kube-score's %s, which finds nothing any more: remove it", deploytest.Chart, id)
		}
	}
}

// kubeScoreExplained lists the checks of the table in the chart README's
// kube-score section.
func kubeScoreExplained(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deploytest.Chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## kube-score\n")
	if !ok {
		t.Fatalf("%s/README.md has no kube-score section", deploytest.Chart)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	explained := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(section, -1) {
		explained[m[1]] = true
	}
	if len(explained) == 0 {
		t.Fatalf("%s/README.md: no check in the kube-score section's table", deploytest.Chart)
	}
	return explained
}
