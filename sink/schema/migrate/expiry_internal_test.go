package migrate

import (
	"regexp"
	"slices"
	"testing"

	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Every table the migrations create partitioned by a month is one that
// expires, by the resolution expiringDefs gives it: a table added with a
// partition and left out of the list would grow forever. The state tables
// are not partitioned.
func TestEveryPartitionedTableExpires(t *testing.T) {
	d := schema.DDL{Names: chconn.NewNames("db", chconn.Topology{})}
	expiring := map[string]schema.Resolution{}
	for _, e := range schema.ExpiringTables() {
		expiring[e.Name] = e.Resolution
	}
	created := regexp.MustCompile("(?s)^CREATE TABLE IF NOT EXISTS `db`\\.`([a-z_]+)` .*\nPARTITION BY toYYYYMM\\(([a-z_]+)\\)")
	var partitioned []string
	for _, m := range migrations() {
		for _, q := range m.statements(d) {
			if got := created.FindStringSubmatch(q); got != nil {
				partitioned = append(partitioned, got[1])
				if _, ok := expiring[got[1]]; !ok {
					t.Errorf("migration %d creates %s partitioned by month, and no resolution expires it", m.id, got[1])
				}
			}
		}
	}
	for name := range expiring {
		if !slices.Contains(partitioned, name) {
			t.Errorf("%s expires, but no migration creates it partitioned by month", name)
		}
	}
	for _, name := range []string{schema.ProjectsTable.Name(), schema.MessagesTable.Name(), schema.LatestRollup, schema.FirstRollup, schema.SpeedRollup, schema.Expiries} {
		if _, ok := expiring[name]; ok {
			t.Errorf("%s, a table of current state or the record of expiry, expires", name)
		}
	}
}
