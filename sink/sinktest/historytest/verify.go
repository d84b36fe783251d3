package historytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readsync/readsync/sink/clickhouse"
	"github.com/readsync/readsync/sink/verify"
)

// AssertVerified fails t when Verify finds a view that differs from its
// brute force, naming every row that does, and returns Verify's report.
func AssertVerified(t *testing.T, ch *clickhouse.ClickHouse, since time.Time) verify.Report {
	t.Helper()
	rep, err := ch.Verify(context.Background(), since)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Views {
		if v.Differs() {
			t.Errorf("%s differs from its brute force:\n%s", v.View, DescribeDiff(v))
		}
	}
	return rep
}

// DescribeDiff lists the rows in which a view differs from its brute
// force, one a line: "missing", "extra" or "wrong", the row's key, and
// its values.
func DescribeDiff(v verify.ViewDiff) string {
	var b strings.Builder
	for _, d := range v.Missing {
		fmt.Fprintf(&b, "  missing %s: %s\n", d.Key, d.Want)
	}
	for _, d := range v.Extra {
		fmt.Fprintf(&b, "  extra   %s: %s\n", d.Key, d.Got)
	}
	for _, d := range v.Wrong {
		fmt.Fprintf(&b, "  wrong   %s:\n    got  %s\n    want %s\n", d.Key, d.Got, d.Want)
	}
	return b.String()
}
