package schema

import "github.com/readsync/readsync/sink/chconn"

// What the tests of package schema_test use of this package's unexported
// names: they check the rollups of a cluster written through package
// clickhouse, which this package's own tests cannot import.

// ExecDDL exposes execDDL.
var ExecDDL = execDDL

// CreateDatabase exposes the statement that creates the database of n.
func CreateDatabase(n chconn.Names) string { return ddl{n}.createDatabase() }

// CreateTable exposes the statements that create t for n.
func CreateTable[R any](n chconn.Names, t *table[R]) []string { return ddl{n}.createTable(t.def()) }

// MessageReadLatestV1 exposes the first release's message_read_latest.
func MessageReadLatestV1(n chconn.Names) string { return messageReadLatestV1(ddl{n}) }

// ProjectReadDailyV1 exposes the first release's project_read_daily.
func ProjectReadDailyV1(n chconn.Names) string { return projectReadDailyV1(ddl{n}) }

// WithProject exposes withProject.
func WithProject(n chconn.Names, left string) string { return withProject(ddl{n}, left) }

// ReadRate exposes readRate.
const ReadRate = readRate

// RollupTables are the names of the rollups of rollupTables.
func RollupTables() []string {
	var names []string
	for _, r := range rollupTables() {
		names = append(names, r.name)
	}
	return names
}
