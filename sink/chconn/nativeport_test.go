package chconn_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/sinktest"
)

func mustDSN(t *testing.T, s string) chconn.DSN {
	t.Helper()
	d, err := chconn.ParseDSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A DSN on an HTTP port is told apart from a native one by the reply to
// the native hello; anything else passes, for the connection to report.
func TestCheckNativePort(t *testing.T) {
	httpPort := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(httpPort.Close)
	httpAddr := httpPort.Listener.Addr().String()

	// A stand-in for a native server: it answers the hello with a packet
	// that is not HTTP.
	native, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepting sync.WaitGroup
	t.Cleanup(func() {
		native.Close()
		accepting.Wait()
	})
	accepting.Go(func() {
		for {
			c, err := native.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("\x00\x0aClickHouse"))
			c.Close()
		}
	})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	err = mustDSN(t, "clickhouse://default:pa55word@"+httpAddr+"/db").CheckNativePort(context.Background())
	want := httpAddr + ` answered the native protocol's hello with an HTTP reply ("HTTP/1.1 400 Bad Request"): ` +
		`that is ClickHouse's HTTP port; use its native port (tcp_port, 9000 by default) in a clickhouse:// DSN`
	var hp *chconn.HTTPPortError
	if err == nil || err.Error() != want || !errors.As(err, &hp) || hp.Addr != httpAddr {
		t.Errorf("HTTP port: %v\nwant %s", err, want)
	}
	for name, dsn := range map[string]string{
		"native":         "clickhouse://" + native.Addr().String() + "/db",
		"refused":        "clickhouse://" + closedAddr + "/db",
		"tls not probed": "clickhouse://" + httpAddr + "/db?secure=true",
	} {
		if err := mustDSN(t, dsn).CheckNativePort(context.Background()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if dsn := os.Getenv("READSYNC_TEST_CLICKHOUSE_DSN"); dsn != "" {
		if err := mustDSN(t, dsn).CheckNativePort(context.Background()); err != nil {
			t.Errorf("the test server's native port: %v", err)
		}
		// The current release's embedded build aborts when a client
		// hangs up on its HTTP port's error reply, as the check does.
		if port := os.Getenv("READSYNC_CLICKHOUSE_HTTP_PORT"); port != "" && !sinktest.Lacks(sinktest.SurvivesKilledClient) {
			err := mustDSN(t, "clickhouse://127.0.0.1:"+port+"/db").CheckNativePort(context.Background())
			if !errors.As(err, &hp) || !strings.HasPrefix(hp.StatusLine, "HTTP/1.") {
				t.Errorf("the test server's HTTP port: %v", err)
			}
		}
	}
}
