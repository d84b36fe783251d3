package deployments_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/readsync/readsync/deployments/deploytest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	kyaml "sigs.k8s.io/yaml"
)

// The version is the VERSION file: a release, or the next with -dev. What
// cannot read it repeats it: the chart's version and appVersion, and the
// image tag of the kustomize bases. The binary embeds it (cmd/readsync's
// TestVersion), and the Makefile tags the image as the binary names its
// build. Each is read here as the tool that uses it reads it.
func TestVersionInOnePlace(t *testing.T) {
	release := strings.TrimSuffix(readRepoFile(t, "VERSION"), "\n")
	if !regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-dev)?$`).MatchString(release) {
		t.Fatalf("VERSION %q: want MAJOR.MINOR.PATCH, with -dev between releases, on one line, which Helm takes as a chart version and Docker as a tag", release)
	}

	t.Run("Makefile", func(t *testing.T) {
		commit := gitOutput(t, "rev-parse", "--short=12", "HEAD")
		if gitOutput(t, "status", "--porcelain") != "" {
			commit += "-modified"
		}
		tag := release
		if strings.Contains(release, "-") || strings.HasSuffix(commit, "-modified") {
			tag = release + "-" + commit
		}
		for target, want := range map[string][]string{
			"build": {"-X main.commit=" + commit + "'"},
			"image": {"--build-arg COMMIT=" + commit + " ", "-t readsync:" + tag + " "},
		} {
			out := makeDryRun(t, target)
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("make -n %s does not run with %q (VERSION %s):\n%s", target, w, release, out)
				}
			}
		}
	})

	t.Run("chart", func(t *testing.T) {
		var chart struct{ Version, AppVersion string }
		if err := kyaml.Unmarshal(deploytest.Run(t, deploytest.Helm, "", "show", "chart", deploytest.Chart), &chart); err != nil {
			t.Fatal(err)
		}
		if chart.Version != release || chart.AppVersion != release {
			t.Errorf("Chart.yaml: version %q, appVersion %q; want both %s, the VERSION file's", chart.Version, chart.AppVersion, release)
		}
		m := deploytest.HelmTemplate(t, "readsync", "--set", "backfill.enabled=true")
		s := deploytest.Find[appsv1.StatefulSet](t, m, "readsync")
		j := deploytest.Find[batchv1.Job](t, m, "readsync-backfill")
		for what, image := range map[string]string{"StatefulSet": s.Spec.Template.Spec.Containers[0].Image, "Job": j.Spec.Template.Spec.Containers[0].Image} {
			if !strings.HasSuffix(image, ":"+release) {
				t.Errorf("%s: the chart's %s runs image %s by default, want the tag %s", m.What, what, image, release)
			}
		}
		if v := s.Labels["app.kubernetes.io/version"]; v != release {
			t.Errorf("%s: StatefulSet labelled app.kubernetes.io/version %q, want %s", m.What, v, release)
		}
	})

	t.Run("kustomize", func(t *testing.T) {
		s := deploytest.Find[appsv1.StatefulSet](t, deploytest.KustomizeBuild(t, deploytest.Base), "readsync")
		j := deploytest.Find[batchv1.Job](t, deploytest.KustomizeBuild(t, deploytest.Backfill), "readsync-backfill")
		c := deploytest.Find[batchv1.CronJob](t, deploytest.KustomizeBuild(t, deploytest.Verify), "readsync-verify")
		for what, image := range map[string]string{deploytest.Base: s.Spec.Template.Spec.Containers[0].Image, deploytest.Backfill: j.Spec.Template.Spec.Containers[0].Image,
			deploytest.Verify: c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image} {
			if !strings.HasSuffix(image, ":"+release) {
				t.Errorf("kustomize build %s runs image %s, want the tag %s, the VERSION file's", what, image, release)
			}
		}
	})
}

// gitOutput runs git in the repository and returns its output, trimmed.
func gitOutput(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git on PATH: %v", err)
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git %s: %v (not a checkout?)", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// makeDryRun prints the commands of a Makefile target without running
// them, with the Makefile's own defaults: nothing from this process's
// environment overrides its variables.
func makeDryRun(t *testing.T, target string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("no make on PATH: %v", err)
	}
	cmd := exec.Command("make", "--no-print-directory", "-n", target)
	cmd.Dir = ".."
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		switch name {
		case "VERSION", "COMMIT", "IMAGE", "LDFLAGS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", target, err, out)
	}
	return string(out)
}
