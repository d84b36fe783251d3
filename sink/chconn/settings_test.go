package chconn_test

import (
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
)

// Every INSERT of rows sets, on each tested release, the settings its
// exactly-once delivery rests on that the release knows, and no other:
// a setting a server does not know fails the statement.
func TestInsertsPinTheSettingsTheServerKnows(t *testing.T) {
	for _, tt := range []struct {
		release string
		knows   []string // what system.settings answers of the names readsync asks about
		want    map[string]any
	}{
		{"18.16.1", []string{"insert_deduplicate"}, map[string]any{"insert_deduplicate": 1}},
		{"26.7.2.1", []string{"insert_deduplicate", "insert_deduplication_token", "deduplicate_blocks_in_dependent_materialized_views",
			"materialized_views_ignore_errors", "async_insert", "non_replicated_deduplication_window"},
			map[string]any{"insert_deduplicate": 1, "deduplicate_blocks_in_dependent_materialized_views": 1, "materialized_views_ignore_errors": 0, "async_insert": 0}},
	} {
		t.Run(tt.release, func(t *testing.T) {
			if got := chconn.PinnedSettings(chconn.ServerKnowing(tt.knows...)); !maps.Equal(got, tt.want) {
				t.Errorf("INSERTs set %v, want %v", got, tt.want)
			}
		})
	}
}

// The table of docs/clickhouse.md lists every setting INSERTs set, with
// its value, and no other.
func TestDocsListTheSettingsInsertsSet(t *testing.T) {
	const path = "../../docs/clickhouse.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "**Settings readsync sets itself.**")
	if !ok {
		t.Fatalf("%s has no paragraph on the settings readsync sets itself", path)
	}
	table, _, _ = strings.Cut(table, "\n\n18.16")
	documented := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]+) \\|").FindAllStringSubmatch(table, -1) {
		v, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatal(err)
		}
		documented[m[1]] = v
	}
	if want := chconn.PinnedInsertSettings(); !maps.Equal(documented, want) {
		t.Errorf("%s lists the settings %v; INSERTs set %v", path, documented, want)
	}
}
