package main

import (
	"fmt"
	"time"
)

// The targets for its workload of 2000 names × 20 messages, and for
// one project with 300 000 messages.
const (
	targetRatio       = 1.1
	targetCPUSeconds  = 1.5
	targetCPUMessages = 40_000 // the message count targetCPUSeconds is stated for
	targetRSSMiB      = 40
	targetBigRSSMiB   = 64
	// projects, messages, message_read_snapshots, and the refreshes of
	// what the snapshots touched: project_read_day_rollup,
	// project_read_hour_rollup, project_read_gain_rollup,
	// project_read_day_gain_rollup and project_read_hour_gain_rollup. The
	// materialized views' own writes are part of the snapshots' INSERT.
	tablesPerBatch   = 8
	runRecordInserts = 1 // the sync_runs record
	// The reconcile after the pass writes the day and hour states of what
	// the pass changed again (project_read_day_rollup,
	// project_read_hour_rollup, project_read_day_gain_rollup,
	// project_read_hour_gain_rollup) and its own record; the gains rows
	// are current, and not written.
	reconcileInserts = 5
)

// workload is one row of the table: what the fake serves and what the run
// is held to.
type workload struct {
	key      string // names the workload's directory under -work
	label    string
	names    int
	messages int // per name
	// ideal is the pass time latency alone imposes, zero when latency does
	// not bound the pass.
	ideal  time.Duration
	target target
	// note explains the row under the table when its columns cannot.
	note string
}

// target is what the issue asks of a workload; a zero field sets no target.
type target struct {
	ratio      float64
	cpuSeconds float64
	rssMiB     float64
	inserts    uint64
}

// snapshots is how many message_read_snapshots rows a complete run writes:
// the fake gives every generated message read_data.
func (w workload) snapshots() uint64 { return uint64(w.names) * uint64(w.messages) }

// rows is how many rows a complete run writes to the three data tables.
func (w workload) rows() uint64 { return uint64(w.names) + 2*w.snapshots() }

// workloads returns the workloads the flags select, in table order.
func (o options) workloads() []workload {
	var ws []workload
	if o.names > 0 {
		w := workload{
			key:      "names",
			label:    fmt.Sprintf("%d names × %d msgs", o.names, o.messages),
			names:    o.names,
			messages: o.messages,
			// Each name makes two dependent requests and C names are in
			// flight, so no pass can be faster than 2·⌈N/C⌉ round trips.
			ideal: 2 * time.Duration((o.names+o.concurrency-1)/o.concurrency) * o.latency,
		}
		w.target = target{
			ratio: targetRatio,
			// CPU is spent per message, so the target scales with the count.
			cpuSeconds: targetCPUSeconds * float64(w.snapshots()) / targetCPUMessages,
			rssMiB:     targetRSSMiB,
			inserts:    o.insertTarget(w),
		}
		ws = append(ws, w)
	}
	if o.bigMessages > 0 {
		w := workload{
			key:      "big",
			label:    fmt.Sprintf("1 project × %d msgs", o.bigMessages),
			names:    1,
			messages: o.bigMessages,
		}
		w.target = target{rssMiB: targetBigRSSMiB, inserts: o.insertTarget(w)}
		w.note = fmt.Sprintf("one name's two requests run one after the other, so latency bounds nothing; "+
			"the time is moving %d messages (no ideal, no CPU target)", o.bigMessages)
		ws = append(ws, w)
	}
	return ws
}

// insertTarget is "about one INSERT per table per batch of rows": six per
// READSYNC_BATCH_ROWS rows written, plus the run record.
func (o options) insertTarget(w workload) uint64 {
	batches := (w.rows() + uint64(o.batchRows) - 1) / uint64(o.batchRows)
	return tablesPerBatch*batches + runRecordInserts + reconcileInserts
}
