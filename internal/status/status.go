// Package status is the daemon's status page: what it is doing, at a
// glance, on its HTTP port. GET / shows it as HTML, rendered on the
// server and readable without JavaScript; GET /status.json answers the
// same content (docs/status.schema.json describes it).
//
// What it shows from ClickHouse (the last passes, the failing names, the
// server and the schema, the last expiry) a Board reads at most once per
// interval, in a loop of its own, whatever the number of viewers; what
// the process knows itself (the spool, the reconcile, the schedules'
// next passes) is read when asked. While ClickHouse does not answer the
// page keeps showing what it read last, with its age, and says why.
package status

import "time"

// Status is the content of the page. Times are UTC; a time that is not
// known is null in JSON.
type Status struct {
	// Version is readsync's build.
	Version     string     `json:"readsync_version"`
	GeneratedAt time.Time  `json:"generated_at"`
	ClickHouse  ClickHouse `json:"clickhouse"`
	Schedules   []Schedule `json:"schedules"`
	Failing     Failing    `json:"failing_names"`
	Spool       Spool      `json:"spool"`
	Reconcile   Reconcile  `json:"reconcile"`
	Expiry      Expiry     `json:"expiry"`
}

// ClickHouse is what the page knows of the server and of its last read.
type ClickHouse struct {
	// Answering is whether the last read succeeded.
	Answering bool `json:"answering"`
	// ReadAt is when the content read from ClickHouse was read, and
	// AgeSeconds how long ago; null before the first read succeeded.
	ReadAt     *time.Time `json:"read_at"`
	AgeSeconds *float64   `json:"age_seconds"`
	// Error is why the last read failed, with no credential in it.
	Error string `json:"error,omitempty"`
	// Reads counts the reads of ClickHouse the page made since start.
	Reads uint64 `json:"reads"`
	// Database is the database readsync writes to.
	Database string `json:"database"`
	// ServerVersion is version() as the server reports it.
	ServerVersion string `json:"server_version"`
	// Migration is the highest schema migration applied, Latest the
	// highest this build knows, Pending those not yet applied.
	Migration uint32   `json:"schema_migration"`
	Latest    uint32   `json:"schema_latest"`
	Pending   []string `json:"migrations_pending"`
}

// Schedule is one schedule this process runs.
type Schedule struct {
	Name string `json:"name"`
	Cron string `json:"cron"`
	// Shard is the share of its names this process takes ("i/n", or
	// "all").
	Shard    string    `json:"shard"`
	NextPass time.Time `json:"next_pass"`
	// LastPass is the last cron pass of this share that sync_runs records
	// within LookBack; null for none.
	LastPass *Pass `json:"last_pass"`
	// LookBackSeconds is how far back the last pass was looked for.
	LookBackSeconds float64 `json:"look_back_seconds"`
	// NamesFailing counts its names whose last pass failed to read them,
	// NamesNotRead those failing READSYNC_NAMES_NOT_READ_PASSES passes in
	// a row or more, every pod's (from name_health).
	NamesFailing uint64 `json:"names_failing"`
	NamesNotRead uint64 `json:"names_not_read"`
}

// Pass is a pass's record in sync_runs.
type Pass struct {
	SnapshotAt      time.Time `json:"snapshot_at"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	// Status is ok, partial or failed.
	Status      string `json:"status"`
	NamesOK     uint64 `json:"names_ok"`
	NamesFailed uint64 `json:"names_failed"`
	Messages    uint64 `json:"messages"`
	Error       string `json:"error,omitempty"`
}

// Failing is the failing names: at most MaxFailing, those failing the
// most passes in a row first.
type Failing struct {
	// Total counts every failing name, Names holds the first of them.
	Total uint64 `json:"total"`
	Names []Name `json:"names"`
}

// MaxFailing is how many failing names the page lists.
const MaxFailing = 100

// Name is a failing name, as name_health describes it.
type Name struct {
	Schedule      string `json:"schedule"`
	NFT           string `json:"nft"`
	FailingPasses uint64 `json:"failing_passes"`
	// Kind is the class of the last failure (see docs/operations.md).
	Kind           string     `json:"kind"`
	LastError      string     `json:"last_error"`
	LastHTTPStatus uint16     `json:"last_http_status"`
	LastFailureAt  time.Time  `json:"last_failure_at"`
	LastSuccessAt  *time.Time `json:"last_success_at"`
	Failures24h    uint64     `json:"failures_24h"`
}

// Spool is what waits in the spool for ClickHouse.
type Spool struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Oldest is when the oldest waiting entry was written (as of the
	// last refresh); null when none waits.
	Oldest      *time.Time `json:"oldest"`
	Quarantined int        `json:"quarantined"`
}

// Reconcile is how far this process's reconcile has read the change
// logs.
type Reconcile struct {
	// LastStepAt is when its last step ended; null before the first.
	LastStepAt *time.Time `json:"last_step_at"`
	// SnapshotChangesTo and TickChangesTo are its position: the time of
	// the last change read from each log, null before the first.
	SnapshotChangesTo *time.Time `json:"snapshot_changes_to"`
	TickChangesTo     *time.Time `json:"tick_changes_to"`
	// ReachedAt is the change time before which every change has been
	// read; LagSeconds how long ago that is.
	ReachedAt  *time.Time `json:"reached_at"`
	LagSeconds *float64   `json:"lag_seconds"`
	// Pending counts the changes after the position (capped, see
	// derived.PendingCap).
	Pending uint64 `json:"pending_changes"`
	// HeldBy names the daemon that runs the steps when it is another.
	HeldBy string `json:"held_by,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Expiry is the retentions and what expiry did last.
type Expiry struct {
	Retentions []Retention `json:"retentions"`
	// LastRun is when a daemon's expiry last ran (any pod's), and Owner
	// which; null when none ran in the last LookBack.
	LastRun *time.Time `json:"last_run"`
	Owner   string     `json:"owner,omitempty"`
	// LastDrop is when a partition was last dropped; Dropped counts the
	// partitions dropped in the last LookBack.
	LastDrop        *time.Time `json:"last_drop"`
	Dropped         uint64     `json:"dropped_partitions"`
	LookBackSeconds float64    `json:"look_back_seconds"`
}

// Retention is how long the rows of a resolution are kept.
type Retention struct {
	Resolution string `json:"resolution"`
	// Keep is a duration such as 90d, or "forever".
	Keep string `json:"keep"`
}
