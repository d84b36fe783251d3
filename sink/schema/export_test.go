package schema

import "github.com/readsync/readsync/sink/chconn"

// What the tests of package schema_test use of this package's unexported
// names: they check the rollups of a cluster written through package
// clickhouse, which this package's own tests cannot import.

// WithProject exposes withProject.
func WithProject(n chconn.Names, left string) string { return withProject(DDL{Names: n}, left) }

// ReadRate exposes readRate.
const ReadRate = readRate

// SpeedFromAges exposes message_read_speed as migration 16 defined it:
// every message's speed computed from the age rollup at each query, what
// the speed rollup must hold.
func SpeedFromAges(n chconn.Names) string { return messageReadSpeedV16(DDL{Names: n}) }
