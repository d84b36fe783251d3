package app

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/readsync/readsync/internal/apptest"
)

// statusScreenshot is the screenshot of the status page in the docs,
// which TestStatusPageInBrowser writes when READSYNC_UPDATE_SCREENSHOT=1.
const statusScreenshot = "../../docs/images/status.png"

// chromium returns the path of Debian's chromium (scripts/chromium.sh
// installs it), skipping the test when there is none, or failing it under
// READSYNC_REQUIRE_CHROMIUM=1.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out []byte
		if out, err = exec.CommandContext(ctx, path, "--version").CombinedOutput(); err != nil {
			err = fmt.Errorf("%s --version: %w: %s", path, err, bytes.TrimSpace(out))
		}
	}
	if err != nil {
		if os.Getenv("READSYNC_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("chromium cannot run, and READSYNC_REQUIRE_CHROMIUM=1: %v", err)
		}
		t.Skipf("chromium cannot run (scripts/chromium.sh installs it; set READSYNC_REQUIRE_CHROMIUM=1 to fail instead): %v", err)
	}
	return path
}

// browser is a headless Chromium that records what its page reports as
// an error: console errors, uncaught exceptions and the browser's own log
// entries of level error (a resource that failed to load).
type browser struct {
	ctx context.Context

	mu       gosync.Mutex
	problems []string
}

// newBrowser starts a headless Chromium for the test, stopped at its end.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		// The tests may run as root, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	// The console is read from the start, by a goroutine the test stops
	// and waits for before the browser goes.
	lctx, stopListening := context.WithCancel(ctx)
	messages := chromedp.Console(lctx)
	var listening gosync.WaitGroup
	listening.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.mu.Lock()
				b.problems = append(b.problems, m.String()+" "+m.URL)
				b.mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		stopListening()
		listening.Wait()
		cancelBrowser()
		cancelAlloc()
	})
	return b
}

// reported returns what the pages reported as errors so far.
func (b *browser) reported() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// The browser notices a page's console error: the check below that the
// status page has none would otherwise prove nothing.
func TestBrowserReportsConsoleErrors(t *testing.T) {
	b := newBrowser(t)
	err := chromedp.Do(b.ctx, chromedp.Navigate(`data:text/html,<p>x</p><script>console.error("broken page")</script>`),
		chromedp.WaitVisible(chromedp.CSS("p")))
	if err != nil {
		t.Fatal(err)
	}
	// Console events may arrive after the load: wait for them, not for
	// a time.
	apptest.Eventually(t, "the console error reported", func() bool {
		return strings.Contains(strings.Join(b.reported(), "\n"), "broken page")
	}, func() string { return strings.Join(b.reported(), "\n") })
}

// A headless Chromium loads the status page of a running daemon with two
// failing names: the page reports no error, shows the failing names, and
// reads the same with JavaScript off. Its screenshot is the docs'
// (docs/images/status.png), written again under
// READSYNC_UPDATE_SCREENSHOT=1.
func TestStatusPageInBrowser(t *testing.T) {
	b := newBrowser(t)
	f, _ := statusFixture(t)
	f.Env["READSYNC_STATUS_INTERVAL"] = "1s"
	log, _ := f.startDaemon(t)
	base := apptest.ListenerURL(t, log.String)
	apptest.Eventually(t, "the two failing names on the page, failing two passes in a row, and the last pass", func() bool {
		st, _, _ := tryStatus(t, base)
		return len(st.Failing.Names) == 2 && st.Failing.Names[1].FailingPasses >= 2 && st.Reconcile.LastStepAt != nil &&
			len(st.Schedules) == 1 && st.Schedules[0].LastPass != nil
	}, log.String)

	if err := chromedp.Do(b.ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("tr.failing-name"))); err != nil {
		t.Fatalf("loading %s/: %v", base, err)
	}
	text, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"denied.eth", "missing.eth", "http_4xx", "not_found", "Failing names", "Schedules"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page as the browser shows it lacks %q:\n%s", want, text)
		}
	}
	if p := b.reported(); len(p) > 0 {
		t.Errorf("the status page reported errors in the browser:\n%s", strings.Join(p, "\n"))
	}

	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() != 1280 || r.Dy() < 600 {
		t.Errorf("screenshot %v, want the window's width and the whole page", r)
	}
	out := filepath.Join(t.TempDir(), "status.png")
	if os.Getenv("READSYNC_UPDATE_SCREENSHOT") == "1" {
		out = statusScreenshot
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// Readable without JavaScript: the content is the server's HTML.
	if _, err := chromedp.Call(b.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b.ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("tr.failing-name"))); err != nil {
		t.Fatalf("loading %s/ without JavaScript: %v", base, err)
	}
	text, err = chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("#failing-names + p")))
	if err != nil || !strings.Contains(text, "2 failing") {
		t.Errorf("with JavaScript off: %q, %v; want the count of failing names", text, err)
	}
	f.NoSecrets(t, text)
}

// The docs' screenshot is a PNG of the page in a browser's window.
func TestStatusScreenshotInDocs(t *testing.T) {
	b, err := os.ReadFile(statusScreenshot)
	if err != nil {
		t.Fatalf("%v (READSYNC_UPDATE_SCREENSHOT=1 go test -run TestStatusPageInBrowser ./internal/app writes it)", err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", statusScreenshot, err)
	}
	if r := img.Bounds(); r.Dx() != 1280 {
		t.Errorf("%s: %v, want the browser window's 1280 pixels wide", statusScreenshot, r)
	}
}
