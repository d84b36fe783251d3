package clickhouse_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/sinktest"
)

func openTLS(t *testing.T, dsn, caFile string) *clickhouse.ClickHouse {
	t.Helper()
	d, err := chconn.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if caFile != "" {
		if d, err = d.WithCAFile(caFile); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := clickhouse.OpenClickHouse(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// Rows written over native TLS to a server whose certificate a private CA
// signed arrive, once the CA file is given.
func TestTLSWithPrivateCA(t *testing.T) {
	srv := sinktest.NewTLSServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ch := openTLS(t, srv.DSN, srv.CAFile)
	if err := ch.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ts := sink.TimeOf(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	b := &sink.Batch{Projects: []sink.Project{{ID: 7, NFT: "tls.eth", CreateAt: ts, FetchedAt: ts, Version: 1}}}
	if err := ch.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	var nft string
	if err := srv.Conn.QueryRow(ctx, "SELECT nft FROM `readsync`.`projects` FINAL WHERE id = 7").Scan(&nft); err != nil {
		t.Fatalf("read the row back: %v", err)
	}
	if nft != "tls.eth" {
		t.Errorf("nft %q, want %q", nft, "tls.eth")
	}

	t.Run("without the CA", func(t *testing.T) {
		_, err := openTLS(t, srv.DSN, "").Ping(ctx)
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("ping error %v, want x509's unknown authority", err)
		}
	})
	t.Run("without secure=true", func(t *testing.T) {
		plain := strings.Replace(srv.DSN, "?secure=true", "?dial_timeout=5s&read_timeout=5s", 1)
		if _, err := openTLS(t, plain, "").Ping(ctx); err == nil {
			t.Fatal("a plain-text connection to the TLS port succeeded")
		}
	})
}
