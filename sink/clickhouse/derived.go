package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/readsync/readsync/sink/derived"
	"github.com/readsync/readsync/sink/verify"
)

// Reconcile refreshes the derived rows of every project snapshot changed
// up to now, a bounded step at a time, recording how far it got (see
// derived.History.Reconcile): what a one-off command runs before it exits.
// Concurrent calls, in this process or others, are safe.
func (c *ClickHouse) Reconcile(ctx context.Context) (derived.ReconcileReport, error) {
	if err := c.ensureSchema(ctx); err != nil {
		return derived.ReconcileReport{}, err
	}
	return c.history.Reconcile(ctx)
}

// ReconcileSettle is how long after its time the reconcile reads a
// change (see derived.History.Settle).
func (c *ClickHouse) ReconcileSettle() time.Duration { return c.history.Settle() }

// ReconcileLease is how long after a daemon's reconcile step the other
// daemons leave the steps to it (see derived.History.Lease).
func (c *ClickHouse) ReconcileLease() time.Duration { return c.history.Lease() }

// ReconcileStep runs one bounded step of the reconcile as owner, a
// daemon process's name (see derived.History.ReconcileStep): what the
// daemon's reconcile loop runs.
func (c *ClickHouse) ReconcileStep(ctx context.Context, owner string, limit int) (derived.StepReport, error) {
	if err := c.ensureSchema(ctx); err != nil {
		return derived.StepReport{}, err
	}
	return c.history.ReconcileStep(ctx, owner, limit)
}

// Verify compares every view with its brute force for the snapshots and
// days from the UTC day of since on (the whole history for the zero
// time).
//
// It changes nothing, so it does not migrate either: a schema with
// migrations pending is an error that says so.
func (c *ClickHouse) Verify(ctx context.Context, since time.Time) (verify.Report, error) {
	v, err := c.SchemaVersion(ctx)
	if err != nil {
		return verify.Report{}, err
	}
	if !v.Current() {
		return verify.Report{}, fmt.Errorf("verify: database %q is at schema version %d, with migrations pending (%s): "+
			"apply them first (readsync --migrate)", c.Database(), v.Applied, strings.Join(v.Pending, ", "))
	}
	return verify.New(c.conn, c.verify...).Verify(ctx, since)
}

// Repair mends what Verify found: each view that differs is written again,
// and the derived rows of each project with a row that differs are
// rebuilt from the stored history (see derived.History.Repair).
func (c *ClickHouse) Repair(ctx context.Context, rep verify.Report) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	var views []string
	var projects []int64
	for _, d := range rep.Views {
		if d.Differs() {
			views = append(views, d.View)
			projects = append(projects, d.Projects...)
		}
	}
	return c.history.Repair(ctx, views, projects)
}

// FoldGains computes the gains of every snapshot in the database from the
// whole history, a group of projects at a time: what migration 7 does for
// the history written before it, and what a benchmark that writes its
// history with INSERT … SELECT runs after. Running it again changes
// nothing the views show.
func (c *ClickHouse) FoldGains(ctx context.Context) error {
	if err := c.ensureSchema(ctx); err != nil {
		return err
	}
	return derived.FoldGains(ctx, c.conn, c.conn.Log(), func(context.Context) error { return nil })
}
