package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestRefused(t *testing.T) {
	ex := func(code int32) error {
		return fmt.Errorf("migration 1 \"x\": %w", &clickhouse.Exception{Code: code, Message: "m"})
	}
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
		fix     string
	}{
		{"readonly user", ex(164), true, "lacks a right readsync needs"},
		{"access denied", ex(497), true, "lacks a right readsync needs"},
		{"wrong password, current release", ex(516), true, "check the user and the password in READSYNC_CLICKHOUSE_DSN"},
		{"unknown user, 18.16", ex(192), true, "check the user and the password in READSYNC_CLICKHOUSE_DSN"},
		{"wrong password, 18.16", ex(193), true, "check the user and the password in READSYNC_CLICKHOUSE_DSN"},
		{"joined subquery without alias", ex(206), true, "does not accept a statement of readsync's"},
		{"syntax error", ex(62), true, "does not accept a statement of readsync's"},
		{"unknown setting", ex(115), true, "the server does not know a setting"},
		{"table dropped by hand", ex(60), true, "not as it left them"},
		{"another answer", ex(1234), true, "see the server's message"},
		{"too many parts", ex(252), false, ""},
		{"memory limit", ex(241), false, ""},
		{"replica without ZooKeeper", ex(242), false, ""},
		{"ON CLUSTER timeout", ex(159), false, ""},
		{"connection refused", errors.New("dial tcp: connect: connection refused"), false, ""},
		{"deadline", fmt.Errorf("insert: %w", context.DeadlineExceeded), false, ""},
		{"nil", nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fix, refused := Refused(tc.err)
			if refused != tc.refused || !strings.Contains(fix, tc.fix) {
				t.Errorf("Refused = %q, %v; want %v with %q", fix, refused, tc.refused, tc.fix)
			}
		})
	}
}
