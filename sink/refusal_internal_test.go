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

// A refusal concerns what a write holds unless every write meets it: a
// login, a right, a statement, setting or database the server does not
// know. A missing table or column concerns the writes to it only.
func TestRefusedForContent(t *testing.T) {
	ex := func(code int32) error {
		return fmt.Errorf("insert 3 rows into projects: %w", &clickhouse.Exception{Code: code, Message: "m"})
	}
	for _, tc := range []struct {
		name    string
		err     error
		content bool
	}{
		{"value the server cannot parse", ex(6), true},
		{"a view of the user's that throws", ex(395), true},
		{"table dropped by hand", ex(60), true},
		{"column dropped by hand", ex(16), true},
		{"readonly user", ex(164), false},
		{"access denied", ex(497), false},
		{"wrong password", ex(516), false},
		{"unknown setting", ex(115), false},
		{"setting constrained by the profile", ex(452), false},
		{"syntax error", ex(62), false},
		{"database dropped", ex(81), false},
		{"too many parts", ex(252), false},
		{"connection refused", errors.New("dial tcp: connect: connection refused"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RefusedForContent(tc.err); got != tc.content {
				t.Errorf("RefusedForContent = %v, want %v", got, tc.content)
			}
		})
	}
}

// Describe says what to do about a refusal, and passes anything else on
// as it is.
func TestDescribe(t *testing.T) {
	refused := fmt.Errorf("INSERT: %w", &clickhouse.Exception{Code: 164, Message: "readonly"})
	if got := Describe(refused); !strings.HasPrefix(got, "ClickHouse refused: INSERT: ") || !strings.Contains(got, "; to fix: ") || !strings.Contains(got, "lacks a right readsync needs") {
		t.Errorf("Describe(a refusal) = %q", got)
	}
	down := errors.New("dial tcp 127.0.0.1:9000: connect: connection refused")
	if got := Describe(down); got != down.Error() {
		t.Errorf("Describe(an outage) = %q, want the error as it is", got)
	}
}
