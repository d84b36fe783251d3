package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readsync/readsync/apiclient/apitest"
)

// syncBuffer is a bytes.Buffer safe to write from run's goroutine while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestPrintNFTNames(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"generated", []string{"-names", "3", "-print-nft-names"}, []string{"proj-00000.dmail", "proj-00001.dmail", "proj-00002.dmail"}},
		{"sample by default", []string{"-print-nft-names"}, sampleNames()},
		{"generated plus sample", []string{"-names", "1", "-sample", "-print-nft-names"}, append(sampleNames(), "proj-00000.dmail")},
		{"nothing", []string{"-sample=false", "-print-nft-names"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), tt.args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d, stderr %s", code, stderr.String())
			}
			want := strings.Join(tt.want, "\n")
			if want != "" {
				want += "\n"
			}
			if stdout.String() != want {
				t.Errorf("stdout = %q, want %q", stdout.String(), want)
			}
		})
	}
}

func sampleNames() []string {
	var names []string
	for _, p := range apitest.SampleProjects() {
		names = append(names, p.NFT)
	}
	return names
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-names", "-1"},
		{"-messages", "-1"},
		{"-latency", "-1s"},
		{"-growth", "-1"},
		{"-no-such-flag"},
		{"extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stderr.Len() == 0 {
				t.Error("no message on stderr")
			}
		})
	}
}

func TestListenFailure(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"-addr", "256.0.0.1:0"}, io.Discard, &stderr); code != 1 {
		t.Errorf("exit %d, want 1 (stderr %s)", code, stderr.String())
	}
}

func TestServe(t *testing.T) {
	urlFile := filepath.Join(t.TempDir(), "upstream.url")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{
			"-names", "2", "-messages", "3", "-url-file", urlFile,
			"-client-id", "7", "-client-secret", "pw", "-growth", "5",
		}, io.Discard, &stderr)
	}()

	base := waitForFile(t, urlFile, done)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("url file holds %q", base)
	}
	if want := "fakeupstream listening on " + base + "\n"; stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+apitest.DetailPath+"?nft_name=proj-00001.dmail", nil)
	req.Header.Set("client_id", "7")
	req.Header.Set("client_secret", "pw")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"nft":"proj-00001.dmail"`) {
		t.Errorf("status %d body %s", res.StatusCode, body)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// waitForFile polls for the URL file that run writes once listening.
func waitForFile(t *testing.T, path string, done <-chan int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			return string(b)
		}
		select {
		case code := <-done:
			t.Fatalf("run exited with %d before listening", code)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatal("url file never appeared")
	return ""
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u")
	if err := os.WriteFile(path, []byte("old and longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("content %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := writeFileAtomic(filepath.Join(dir, "missing", "u"), []byte("x")); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}
