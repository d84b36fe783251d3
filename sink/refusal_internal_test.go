package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
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
		// The driver's, not the server's: no answer of the server, so not
		// a refusal, though one for what the write holds (see below).
		{"value the driver cannot convert", appendRow(t, "Enum8('hourly' = 1)", "weekly"), false, ""},
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
		{"value the driver cannot convert", appendRow(t, "Enum8('hourly' = 1)", "weekly"), true},
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

// appendRow appends one value to a block of the driver's with a column of
// type typ, as an INSERT does, and returns the driver's error wrapped as
// readsync's insert path wraps it.
func appendRow(t *testing.T, typ string, v any) error {
	t.Helper()
	b := proto.NewBlock()
	if err := b.AddColumn("c", column.Type(typ)); err != nil {
		t.Fatal(err)
	}
	return insertError(b.Append(v))
}

// insertError wraps err as chconn.Insert does, or returns nil.
func insertError(err error) error {
	if err == nil {
		return nil
	}
	return &TableError{Table: "t", Rows: 1, Err: fmt.Errorf("insert into t: row 0: %w", err)}
}

// The driver converts every value to its column's type itself, and fails
// before sending the row: that concerns what the write holds, whatever
// the column. Errors of the connection, of the server, and a count of
// values that differs from the columns' (which every write meets) do not.
func TestUnconvertible(t *testing.T) {
	server := insertError(&clickhouse.Exception{Code: 6, Message: "Cannot parse string 'weekly' as UInt64"})
	one := proto.NewBlock()
	if err := one.AddColumn("c", "String"); err != nil {
		t.Fatal(err)
	}
	tooMany := one.Append("a", "b")
	if tooMany == nil {
		t.Fatal("a block of one column took two values")
	}
	for _, tc := range []struct {
		name    string
		err     error
		content bool
	}{
		{"an element the Enum lacks", appendRow(t, "Enum8('hourly' = 1, 'daily' = 2)", "weekly"), true},
		{"a number into a String", appendRow(t, "String", uint64(7)), true},
		{"a string into a number", appendRow(t, "UInt64", "7"), true},
		{"a time into a number", appendRow(t, "UInt64", time.Unix(0, 0)), true},
		{"a string longer than a FixedString", appendRow(t, "FixedString(4)", "hourly"), true},
		{"an array of strings into an array of numbers", appendRow(t, "Array(UInt64)", []string{"a"}), true},
		{"as the batch repeats it", fmt.Errorf("%w: %w", clickhouse.ErrBatchInvalid, appendRow(t, "String", 1.5)), true},
		{"values not one per column", insertError(tooMany), false},
		{"the server's exception for a value", server, false},
		{"batch already sent", insertError(clickhouse.ErrBatchAlreadySent), false},
		{"connection reset", insertError(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), false},
		{"end of stream", insertError(io.ErrUnexpectedEOF), false},
		{"deadline", insertError(context.DeadlineExceeded), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unconvertible(tc.err); got != tc.content {
				t.Errorf("Unconvertible(%v) = %v, want %v", tc.err, got, tc.content)
			}
			if got := RefusedForContent(tc.err); tc.content && !got {
				t.Errorf("RefusedForContent(%v) = false, want true", tc.err)
			}
			if fix := Fix(tc.err); tc.content && !strings.Contains(fix, "docs/clickhouse.md") {
				t.Errorf("Fix(%v) = %q, want the column's type to give back", tc.err, fix)
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
