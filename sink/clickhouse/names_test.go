package clickhouse_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/sinktest/historytest"
	"github.com/readsync/readsync/sync"
)

// A schedule's nft_names_query runs read-only on readsync's ClickHouse:
// its one String column's values are the names, read with the schedule's
// other sources; a query of another shape, or one that writes, is an
// error naming the schedule and the source.
func TestQueryNames(t *testing.T) {
	ch, db := historytest.OpenTestSink(t)
	ctx := context.Background()
	table := db.Table("tracked_projects")
	for _, q := range []string{
		"CREATE TABLE " + table + " (nft String, active UInt8) ENGINE = MergeTree ORDER BY nft",
		"INSERT INTO " + table + " (nft, active) SELECT tupleElement(r, 1), tupleElement(r, 2) FROM " +
			"(SELECT arrayJoin([('b.dmail', 1), ('a.dmail', 1), ('café-☕.eth', 1), ('gone.dmail', 0), ('', 1)]) AS r)",
	} {
		if err := db.Conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	query := fmt.Sprintf("SELECT nft FROM %s WHERE active = 1", table)
	s := sync.Schedule{Name: "hourly", NFTNames: []string{"a.dmail", "z.dmail"}, NamesQuery: query}
	names, counts, err := sync.ResolveNames(ctx, s, ch)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.dmail", "b.dmail", "café-☕.eth", "z.dmail"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if want := []sync.SourceCount{{Source: sync.SourceInline, Names: 2}, {Source: sync.SourceQuery, Names: 3}}; !slices.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}

	for _, tt := range []struct{ name, query, want string }{
		{"two columns", fmt.Sprintf("SELECT nft, active FROM %s", table), "returns 2 columns (nft String, active UInt8); want one String column"},
		{"not a String", fmt.Sprintf("SELECT active FROM %s", table), "returns column active of type UInt8; want one String column"},
		{"a syntax error", "SELECT nft FROM " + table + " WHERE", "Syntax error"},
		{"a write", fmt.Sprintf("INSERT INTO %s (nft, active) SELECT 'x', 1", table), "readonly"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := sync.Schedule{Name: "hourly", NamesQuery: tt.query}
			names, _, err := sync.ResolveNames(ctx, s, ch)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), `schedule "hourly": nft_names_query "`) {
				t.Errorf("error %v, want it to name the schedule, the query and %q", err, tt.want)
			}
			if len(names) != 0 {
				t.Errorf("names %q", names)
			}
		})
	}
	var n uint64
	if err := db.Conn.QueryRow(ctx, "SELECT count() FROM "+table+" WHERE nft = 'x'").Scan(&n); err != nil || n != 0 {
		t.Errorf("the query wrote %d rows (%v)", n, err)
	}
}
