// Package expiry keeps readsync's history in bounded space: it drops the
// partitions whose rows are all older than their resolution's retention
// (package schema's expiry.go lists the tables), on a single server or on
// every shard of a cluster, and records each drop first in the expiries
// table. A drop removes whole parts: no mutation, no rewrite of what is
// kept, so a retention can be changed at any time for the cost of the
// parts it drops.
//
// The derived rows computed from what expired stay as they were: the
// record says, per resolution, the time from which on the rows are all
// kept (Edges), before which readers take the derived rows as given.
package expiry

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// Policy is the retention of each resolution; a resolution it lacks, or
// gives 0, keeps its rows forever.
type Policy map[schema.Resolution]time.Duration

// Empty reports whether the policy keeps everything forever.
func (p Policy) Empty() bool {
	for _, d := range p {
		if d > 0 {
			return false
		}
	}
	return true
}

// Partition is one partition of an expiring table, as system.parts shows
// its active parts, on every host of a cluster.
type Partition struct {
	Table      string
	Resolution schema.Resolution
	// ID is the partition's id (the month, such as 202605).
	ID string
	// Oldest and Newest are the times of its oldest and newest rows
	// (midnight UTC of the days of a table by day).
	Oldest, Newest time.Time
	// Rows and Bytes are its rows and bytes on disk, summed over the
	// hosts (replicas included).
	Rows, Bytes uint64
}

// KeptFrom is the time from which on the rows of the partition's
// resolution are all kept once it is dropped: the second after its newest
// row, the hour after its newest hour, or the day after its newest day.
func (p Partition) KeptFrom() time.Time {
	switch p.Resolution {
	case schema.Daily:
		return p.Newest.AddDate(0, 0, 1)
	case schema.Hourly:
		return p.Newest.Add(time.Hour)
	}
	return p.Newest.Add(time.Second)
}

// Plan is what an expiry would drop.
type Plan struct {
	// Now is the server's time the cutoffs count from.
	Now time.Time
	// Cutoffs are, per resolution with a retention, the time before which
	// rows expire: a partition whose newest row is older is dropped.
	Cutoffs map[schema.Resolution]time.Time
	// Drops are the partitions to drop, by resolution and table, oldest
	// first.
	Drops []Partition
	// Held are the partitions of the change logs that are past their
	// retention but hold changes the reconcile has not read yet (Unread
	// says from when, per log): dropping them would lose what the derived
	// history has still to learn. The first run after the reconcile has
	// read them drops them.
	Held []Partition
	// Unread is, per change log with changes the reconcile has not read,
	// the time of the first of them, as the Reconcile said.
	Unread map[string]time.Time
}

// isChangeLog reports whether table is one of the change logs the
// reconcile reads.
func isChangeLog(table string) bool {
	return table == schema.SnapshotChanges || table == schema.TickChanges
}

// Reconcile says what the reconcile has not read yet: per change log
// table with such changes, the time of the first (package derived's
// History).
type Reconcile interface {
	FirstUnread(ctx context.Context) (map[string]time.Time, error)
}

// Expirer drops the partitions of one database's expiring tables.
type Expirer struct {
	conn      *chconn.Conn
	names     chconn.Names
	reconcile Reconcile
}

// New returns the Expirer of the database of c, whose change logs r
// reads.
func New(c *chconn.Conn, r Reconcile) *Expirer {
	return &Expirer{conn: c, names: c.Names(), reconcile: r}
}

// Plan lists what an expiry under p would drop now, without dropping it.
func (e *Expirer) Plan(ctx context.Context, p Policy) (Plan, error) {
	var plan Plan
	var now time.Time
	if err := e.conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return plan, e.conn.Redact(fmt.Errorf("expiry: read the server's time: %w", err))
	}
	plan.Now, plan.Cutoffs = now.UTC(), map[schema.Resolution]time.Time{}
	for _, r := range schema.Resolutions() {
		if d := p[r]; d > 0 {
			plan.Cutoffs[r] = plan.Now.Add(-d)
		}
	}
	if len(plan.Cutoffs) == 0 {
		return plan, nil
	}
	parts, err := e.Partitions(ctx)
	if err != nil {
		return plan, err
	}
	for _, part := range parts {
		cut, ok := plan.Cutoffs[part.Resolution]
		if !ok || !part.Newest.Before(cut) {
			continue
		}
		// The reconcile is asked once, and only when a change log has a
		// partition past the retention: most runs have none.
		if isChangeLog(part.Table) && plan.Unread == nil {
			if plan.Unread, err = e.reconcile.FirstUnread(ctx); err != nil {
				return plan, fmt.Errorf("expiry: %w", err)
			}
		}
		if first, unread := plan.Unread[part.Table]; unread && !part.Newest.Before(first) {
			plan.Held = append(plan.Held, part)
			continue
		}
		plan.Drops = append(plan.Drops, part)
	}
	return plan, nil
}

// Partitions lists the partitions of every expiring table, in the order
// of schema.ExpiringTables, each table's oldest first.
func (e *Expirer) Partitions(ctx context.Context) ([]Partition, error) {
	locals, err := e.localNames(ctx)
	if err != nil {
		return nil, err
	}
	tables := schema.ExpiringTables()
	byLocal := map[string]schema.ExpiringTable{}
	quoted := make([]string, 0, len(tables))
	for _, t := range tables {
		byLocal[locals[t.Name]] = t
		quoted = append(quoted, chconn.QuoteString(locals[t.Name]))
	}
	parts := "system.parts"
	if e.names.Clustered() {
		parts = fmt.Sprintf("cluster(%s, system, parts)", chconn.QuoteString(e.names.Topology().Cluster))
	}
	// A Date partition key fills min_date and max_date, a DateTime one
	// min_time and max_time: the greater of each pair is the one filled.
	q := fmt.Sprintf(`SELECT table, partition_id,
    toUInt32(min(greatest(min_time, toDateTime(min_date, 'UTC')))), toUInt32(max(greatest(max_time, toDateTime(max_date, 'UTC')))),
    sum(rows), sum(bytes_on_disk)
FROM %s
WHERE active AND database = %s AND table IN (%s)
GROUP BY table, partition_id
ORDER BY partition_id`, parts, chconn.QuoteString(e.names.Database()), strings.Join(quoted, ", "))
	got := map[string][]Partition{}
	err = chconn.QueryEach(ctx, e.conn, q, func(rows driver.Rows) error {
		var (
			local, id      string
			oldest, newest uint32
			n, bytes       uint64
		)
		if err := rows.Scan(&local, &id, &oldest, &newest, &n, &bytes); err != nil {
			return err
		}
		t := byLocal[local]
		got[t.Name] = append(got[t.Name], Partition{Table: t.Name, Resolution: t.Resolution, ID: id,
			Oldest: time.Unix(int64(oldest), 0).UTC(), Newest: time.Unix(int64(newest), 0).UTC(), Rows: n, Bytes: bytes})
		return nil
	})
	if err != nil {
		return nil, e.conn.Redact(fmt.Errorf("expiry: read the partitions from system.parts: %w", err))
	}
	var out []Partition
	for _, t := range tables {
		out = append(out, got[t.Name]...)
	}
	return out, nil
}

// localNames returns, for each expiring table, the name of the table that
// holds its rows on each host: the table itself on a single server; in
// cluster mode the one its Distributed table reads, which after the move
// onto the snapshots' sort key is not <name>_local for every table (see
// chconn.Names.LocalName).
func (e *Expirer) localNames(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range schema.ExpiringTables() {
		out[t.Name] = e.names.LocalName(t.Name)
	}
	if !e.names.Clustered() {
		return out, nil
	}
	q := "SELECT name, engine_full FROM system.tables WHERE database = ? AND engine = 'Distributed'"
	engines, err := chconn.QueryMap[string, string](ctx, e.conn, q, e.names.Database())
	if err != nil {
		return nil, e.conn.Redact(fmt.Errorf("expiry: read the Distributed tables: %w", err))
	}
	for name := range out {
		if local, ok := chconn.DistributedLocal(engines[name]); ok {
			out[name] = local
		}
	}
	return out, nil
}

// Report is what a Run did.
type Report struct {
	Plan
	// Dropped are the partitions dropped, in order; on an error, those
	// dropped before it.
	Dropped []Partition
	// Waiting is set when the run dropped nothing because the move of
	// the snapshot table onto its sort key is under way: expiry waits for
	// it to finish, as the move copies partitions.
	Waiting bool
}

// Rows and Bytes sum what the run dropped.
func (r Report) Rows() (rows, bytes uint64) {
	for _, p := range r.Dropped {
		rows += p.Rows
		bytes += p.Bytes
	}
	return rows, bytes
}

// Run drops what Plan lists under p, oldest first, recording each
// partition in the expiries table before dropping it, as owner (a daemon
// process, empty for a one-off command). A partition that fails to drop
// stops the run: the next one tries it again.
func (e *Expirer) Run(ctx context.Context, p Policy, owner string) (Report, error) {
	var rep Report
	if p.Empty() {
		plan, err := e.Plan(ctx, p)
		rep.Plan = plan
		return rep, err
	}
	moving, err := e.moving(ctx)
	if err != nil {
		return rep, err
	}
	if moving {
		rep.Waiting = true
		return rep, nil
	}
	plan, err := e.Plan(ctx, p)
	rep.Plan = plan
	if err != nil {
		return rep, err
	}
	locals, err := e.localNames(ctx)
	if err != nil {
		return rep, err
	}
	// Each table's partitions oldest first, the raw resolution first: the
	// edge only ever moves forward.
	drops := slices.Clone(plan.Drops)
	slices.SortStableFunc(drops, func(a, b Partition) int { return a.Newest.Compare(b.Newest) })
	for _, part := range drops {
		if err := e.record(ctx, plan.Now, owner, part); err != nil {
			return rep, err
		}
		q := fmt.Sprintf("ALTER TABLE %s%s DROP PARTITION ID %s", e.names.Table(locals[part.Table]), e.names.OnCluster(), chconn.QuoteString(part.ID))
		if err := e.conn.Exec(ctx, q); err != nil {
			return rep, e.conn.Redact(fmt.Errorf("expiry: drop partition %s of %s (%s rows up to %s): %w",
				part.ID, part.Table, part.Resolution, part.Newest.Format(time.DateTime), err))
		}
		rep.Dropped = append(rep.Dropped, part)
		e.conn.Log().Info("expired a partition", "table", part.Table, "resolution", string(part.Resolution), "partition", part.ID,
			"newest", part.Newest.Format(time.RFC3339), "rows", part.Rows, "bytes", part.Bytes)
	}
	return rep, nil
}

// record writes the drop of part into the expiries table.
func (e *Expirer) record(ctx context.Context, now time.Time, owner string, part Partition) error {
	q := "INSERT INTO " + e.names.Table(schema.Expiries) + " (started_at, owner, resolution, table, partition, kept_from, rows, bytes)"
	err := e.conn.InsertRow(e.conn.SyncInserts(ctx), q, now, owner, string(part.Resolution), part.Table, part.ID, part.KeptFrom(), part.Rows, part.Bytes)
	if err != nil {
		return e.conn.Redact(fmt.Errorf("expiry: record the drop of partition %s of %s in %s: %w", part.ID, part.Table, schema.Expiries, err))
	}
	return nil
}

// moving reports whether the move of the snapshot table onto its sort key
// is under way: its copy exists.
func (e *Expirer) moving(ctx context.Context) (bool, error) {
	var n uint64
	q := "SELECT count() FROM system.tables WHERE database = ? AND name = ?"
	if err := e.conn.QueryRow(ctx, q, e.names.Database(), schema.ResortCopy).Scan(&n); err != nil {
		return false, e.conn.Redact(fmt.Errorf("expiry: look for the move of the snapshot table: %w", err))
	}
	return n > 0, nil
}

// Edges is where each resolution's kept rows start.
type Edges map[schema.Resolution]time.Time

// Raw is the time from which on every raw row is kept; the zero time when
// none expired.
func (e Edges) Raw() time.Time { return e[schema.Raw] }

// RawDay is the first UTC day all of whose raw rows are kept: the derived
// rows of a day before it were computed from rows of which some expired.
func (e Edges) RawDay() time.Time {
	r := e.Raw()
	if r.IsZero() {
		return r
	}
	return time.Unix(int64(chconn.DayStart(uint32(r.Unix()+86399))), 0).UTC()
}

// ReadEdges reads the edges from the expiries table: per resolution, the
// latest time from which on its rows were kept by a drop.
func ReadEdges(ctx context.Context, c *chconn.Conn) (Edges, error) {
	q := "SELECT resolution, toUInt32(max(kept_from)) FROM " + c.Names().Table(schema.Expiries) + " WHERE table != '' GROUP BY resolution"
	m, err := chconn.QueryMap[string, uint32](ctx, c, q)
	if err != nil {
		return nil, c.Redact(fmt.Errorf("read where the kept history starts from %s: %w", schema.Expiries, err))
	}
	out := Edges{}
	for r, at := range m {
		out[schema.Resolution(r)] = time.Unix(int64(at), 0).UTC()
	}
	return out, nil
}

// Claim reports which daemon runs expiry now, empty when it is owner: the
// one that recorded the latest run within lease. A daemon that finds
// nobody holds it records a run and reads the runs back a second later,
// so that of several daemons starting together one runs it (ties broken
// by name, so that every daemon names the same one). The holder's record
// of this run renews its lease.
func (e *Expirer) Claim(ctx context.Context, owner string, lease time.Duration) (string, error) {
	for claimed := false; ; claimed = true {
		holder, err := e.holder(ctx, lease)
		switch {
		case err != nil:
			return "", err
		case holder != "" && holder != owner:
			return holder, nil
		case holder == owner && claimed:
			return "", nil
		}
		q := "INSERT INTO " + e.names.Table(schema.Expiries) + " (started_at, owner, resolution, table, partition, kept_from, rows, bytes)"
		if err := e.conn.InsertRow(e.conn.SyncInserts(ctx), q, time.Now().UTC().Truncate(time.Second), owner, "", "", "", time.Unix(0, 0).UTC(), uint64(0), uint64(0)); err != nil {
			return "", e.conn.Redact(fmt.Errorf("expiry: record the run in %s: %w", schema.Expiries, err))
		}
		if holder == owner {
			return "", nil
		}
		if claimed {
			// The claim is not read back (a replica behind): run, which
			// costs no more than a run twice.
			return "", nil
		}
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-time.After(time.Second):
		}
	}
}

// holder returns the daemon that recorded the latest run within lease.
func (e *Expirer) holder(ctx context.Context, lease time.Duration) (string, error) {
	var owner string
	q := fmt.Sprintf("SELECT owner FROM %s WHERE table = '' AND owner != '' AND started_at >= now() - %d ORDER BY started_at DESC, owner DESC LIMIT 1",
		e.names.Table(schema.Expiries), int64(lease/time.Second))
	err := chconn.QueryEach(ctx, e.conn, q, func(rows driver.Rows) error { return rows.Scan(&owner) })
	if err != nil {
		return "", e.conn.Redact(fmt.Errorf("expiry: read the latest run in %s: %w", schema.Expiries, err))
	}
	return owner, nil
}
