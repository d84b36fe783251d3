package chconn_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
)

func TestWithCAFileErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	keyOnly := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyOnly, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dsn, file, want string
	}{
		{"plain-text DSN", "clickhouse://u:hunter2@127.0.0.1:9000/x", notPEM, "a CA file needs a DSN with secure=true"},
		{"missing file", "clickhouse://u:hunter2@127.0.0.1:9440/x?secure=true", filepath.Join(dir, "nope.pem"), "CA file: open " + filepath.Join(dir, "nope.pem") + ": no such file"},
		{"not PEM", "clickhouse://u:hunter2@127.0.0.1:9440/x?secure=true", notPEM, "CA file " + notPEM + ": no PEM certificate in it"},
		{"a key, no certificate", "clickhouse://u:hunter2@127.0.0.1:9440/x?secure=true", keyOnly, "CA file " + keyOnly + ": no PEM certificate in it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := chconn.ParseDSN(tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.WithCAFile(tt.file)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}
