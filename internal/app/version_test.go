package app

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	kyaml "sigs.k8s.io/yaml"
)

// The release is the VERSION file. What cannot read it repeats it: the
// chart's version and appVersion, and the image tag of both kustomize
// bases. The Makefile stamps it into the binary and tags the image with
// it. Each is read here as the tool that uses it reads it.
func TestVersionInOnePlace(t *testing.T) {
	release := strings.TrimSuffix(readRepoFile(t, "VERSION"), "\n")
	if !regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`).MatchString(release) {
		t.Fatalf("VERSION %q: want MAJOR.MINOR.PATCH on one line, which Helm takes as a chart version and Docker as a tag", release)
	}

	t.Run("Makefile", func(t *testing.T) {
		for target, want := range map[string][]string{
			"build": {"-X main.version=" + release + " "},
			"image": {"--build-arg VERSION=" + release + " ", "-t readsync:" + release + " "},
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
		if err := kyaml.Unmarshal(tool(t, helmTool, "", "show", "chart", helmChart), &chart); err != nil {
			t.Fatal(err)
		}
		if chart.Version != release || chart.AppVersion != release {
			t.Errorf("Chart.yaml: version %q, appVersion %q; want both %s, the VERSION file's", chart.Version, chart.AppVersion, release)
		}
		m := helmTemplate(t, "readsync", "--set", "backfill.enabled=true")
		s := find[appsv1.StatefulSet](t, m, "readsync")
		j := find[batchv1.Job](t, m, "readsync-backfill")
		for what, image := range map[string]string{"StatefulSet": s.Spec.Template.Spec.Containers[0].Image, "Job": j.Spec.Template.Spec.Containers[0].Image} {
			if !strings.HasSuffix(image, ":"+release) {
				t.Errorf("%s: the chart's %s runs image %s by default, want the tag %s", m.what, what, image, release)
			}
		}
		if v := s.Labels["app.kubernetes.io/version"]; v != release {
			t.Errorf("%s: StatefulSet labelled app.kubernetes.io/version %q, want %s", m.what, v, release)
		}
	})

	t.Run("kustomize", func(t *testing.T) {
		s := find[appsv1.StatefulSet](t, kustomizeBuild(t, k8sBase), "readsync")
		j := find[batchv1.Job](t, kustomizeBuild(t, k8sBackfill), "readsync-backfill")
		c := find[batchv1.CronJob](t, kustomizeBuild(t, k8sVerify), "readsync-verify")
		for what, image := range map[string]string{k8sBase: s.Spec.Template.Spec.Containers[0].Image, k8sBackfill: j.Spec.Template.Spec.Containers[0].Image,
			k8sVerify: c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image} {
			if !strings.HasSuffix(image, ":"+release) {
				t.Errorf("kustomize build %s runs image %s, want the tag %s, the VERSION file's", what, image, release)
			}
		}
	})
}

// readRepoFile returns a file of the repository, by its path from the root.
func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
	cmd.Dir = "../.."
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
