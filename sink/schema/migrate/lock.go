package migrate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/readsync/readsync/sink/chconn"
	"github.com/readsync/readsync/sink/schema"
)

// One process migrates at a time. The folds some migrations run over the
// existing history are costly, and the one into the summing rollup is not
// safe to run twice at once, so when several processes start together
// (a StatefulSet's pods, a Job beside them), one takes a lock, migrates,
// and the others wait for it and then find the schema current.
//
// ClickHouse has no locks; what it has is a CREATE TABLE that one creator
// of a name wins, on one server and, through the ordered queue of
// distributed DDL, on a cluster. The lock is a table: the process that
// creates it holds it, writes a heartbeat into it while it migrates, and
// drops it when done. A holder that dies leaves it behind: a waiter that
// sees no heartbeat for the lease renames it away (of two waiters, one
// rename wins) and tries again. A holder checks before each step that the
// lock is still its own, so one that stalled past the lease stops rather
// than migrate beside its successor.

// migrationLockTable is the lock's name in the database.
const migrationLockTable = "schema_migration_lock"

// DefaultLease is how long waiters go without seeing a heartbeat of the
// migration lock before they take it over: long enough that a holder
// whose server is slow to answer for a while keeps it.
const DefaultLease = 2 * time.Minute

// Lease is how long waiters go without seeing a heartbeat of the lock
// before they take it over; zero means DefaultLease. A holder writes a
// heartbeat every twelfth of it, and waiters look every sixtieth, so
// that a shorter lease (a test's) keeps the same proportions.
type Lease time.Duration

func (l Lease) lease() time.Duration {
	if l <= 0 {
		return DefaultLease
	}
	return time.Duration(l)
}

func (l Lease) heartbeat() time.Duration { return l.lease() / 12 }
func (l Lease) poll() time.Duration      { return l.lease() / 60 }

// errLockLost says that another process took the migration lock over.
var errLockLost = errors.New("another process took the migration lock over (this one went without a heartbeat for longer than the lease); it applies the migrations")

// Lock is the migration lock, held by this process. Its heartbeat runs
// until Release, which the holder must call.
type Lock struct {
	c     *chconn.Conn
	lease Lease
	owner string
	stop  chan struct{}
	wg    sync.WaitGroup
}

// TakeLock takes the database's migration lock, waiting while a live
// process holds it, as long as ctx allows. Besides the migrations, the
// move onto the sort key (package resort) takes it for each of its steps.
func TakeLock(ctx context.Context, c *chconn.Conn, lease Lease) (*Lock, error) {
	owner := lockOwner()
	var (
		last     string
		progress = time.Now()
		said     bool
	)
	for {
		err := c.Exec(ctx, createLock(schema.DDL{Names: c.Names()}, owner))
		if err == nil {
			l := &Lock{c: c, lease: lease, owner: owner, stop: make(chan struct{})}
			if err := l.beat(ctx); err != nil {
				l.drop(context.WithoutCancel(ctx))
				return nil, err
			}
			l.wg.Go(l.heartbeats)
			return l, nil
		}
		if !tableExists(err) {
			return nil, fmt.Errorf("take the migration lock (create %s): %w", migrationLockTable, err)
		}
		holder, state, err := lockState(ctx, c)
		switch {
		case err != nil && unknownTable(err):
			continue // dropped meanwhile: try again at once
		case err != nil:
			return nil, fmt.Errorf("read the migration lock: %w", err)
		}
		if state != last {
			last, progress = state, time.Now()
		}
		if time.Since(progress) > lease.lease() {
			c.Log().Warn("taking over the migration lock of a process that stopped its heartbeat", "holder", holder, "lease", lease.lease().String())
			if err := expireLock(ctx, c); err != nil {
				return nil, err
			}
			continue
		}
		if !said {
			c.Log().Info("waiting for another process's migration", "holder", holder)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the migration of %s: %w", holder, context.Cause(ctx))
		case <-time.After(lease.poll()):
		}
	}
}

// lockOwner names this process in the lock: its host and pid, which an
// operator can look up, and a random part, which tells two processes of
// one pid namespace apart. It holds no quote, so that the server writes
// it back as it was given.
func lockOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	host = strings.NewReplacer(`'`, "", `\\`, "").Replace(host)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// createLock is the statement that takes the lock for owner, whom the
// table names in its definition (the default of its owner column), so
// that the lock says who holds it from the moment it exists. In cluster
// mode the table replicates across the whole cluster, so that every host
// sees the heartbeats, under a ZooKeeper path of its own each time: a
// path a crash left behind never stops the next lock.
func createLock(d schema.DDL, owner string) string {
	eng := "MergeTree()"
	if d.Clustered() {
		var b [4]byte
		_, _ = rand.Read(b[:])
		path := strings.ReplaceAll(strings.ReplaceAll(d.ReplicaPath(), "{shard}", "all"), "{table}", migrationLockTable+"/"+hex.EncodeToString(b[:]))
		eng = fmt.Sprintf("ReplicatedMergeTree(%s, '{replica}')", chconn.QuoteString(path))
	}
	return fmt.Sprintf("CREATE TABLE %s%s (owner String DEFAULT %s, heartbeat DateTime) ENGINE = %s ORDER BY heartbeat",
		d.Table(migrationLockTable), d.OnCluster(), chconn.QuoteString(owner), eng)
}

// lockState reads who holds the lock and a summary of its heartbeats,
// which changes while the holder lives.
func lockState(ctx context.Context, c *chconn.Conn) (holder, state string, err error) {
	var def string
	q := "SELECT default_expression FROM system.columns WHERE database = ? AND table = ? AND name = 'owner'"
	if err := c.QueryRow(ctx, q, c.Names().Database(), migrationLockTable).Scan(&def); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", "", &clickhouse.Exception{Code: unknownTableCode, Message: "the migration lock is gone"}
		}
		return "", "", err
	}
	// The default is the quoted owner, as the server writes it back.
	holder = strings.Trim(def, "'")
	var (
		n  uint64
		at uint32
	)
	if err := c.QueryRow(ctx, "SELECT count(), toUInt32(max(heartbeat)) FROM "+c.Names().Table(migrationLockTable)).Scan(&n, &at); err != nil {
		return "", "", err
	}
	return holder, fmt.Sprintf("%d %d", n, at), nil
}

// expireLock moves a dead holder's lock away and drops it. Of several
// waiters, one rename wins; the others find the lock gone.
func expireLock(ctx context.Context, c *chconn.Conn) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	expired := migrationLockTable + "_expired_" + hex.EncodeToString(b[:])
	err := c.Exec(ctx, fmt.Sprintf("RENAME TABLE %s TO %s%s", c.Names().Table(migrationLockTable), c.Names().Table(expired), c.Names().OnCluster()))
	switch {
	case err != nil && unknownTable(err):
		return nil
	case err != nil:
		return fmt.Errorf("take over the migration lock: %w", err)
	}
	if err := ExecDDL(ctx, c, "DROP TABLE IF EXISTS "+c.Names().Table(expired)+c.Names().OnCluster()); err != nil {
		c.Log().Warn("expired migration lock not dropped", "table", expired, "err", c.Redact(err))
	}
	return nil
}

// beat writes one heartbeat.
func (l *Lock) beat(ctx context.Context) error {
	q := fmt.Sprintf("INSERT INTO %s (heartbeat) SELECT now()", l.c.Names().Table(migrationLockTable))
	if err := l.c.Exec(l.c.SyncInserts(ctx), q); err != nil {
		return fmt.Errorf("migration lock heartbeat: %w", err)
	}
	return nil
}

// heartbeats writes a heartbeat every twelfth of the lease until Release. One
// that fails is logged: the next may succeed, and a holder that goes
// without for the lease finds out at its next step.
func (l *Lock) heartbeats() {
	t := time.NewTicker(l.lease.heartbeat())
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.lease.heartbeat())
			if err := l.beat(ctx); err != nil {
				l.c.Log().Warn("migration lock heartbeat failed", "err", l.c.Redact(err))
			}
			cancel()
		}
	}
}

// held returns errLockLost when the lock is no longer this process's.
func (l *Lock) held(ctx context.Context) error {
	holder, _, err := lockState(ctx, l.c)
	switch {
	case err != nil && unknownTable(err):
		return errLockLost
	case err != nil:
		return fmt.Errorf("read the migration lock: %w", err)
	case holder != l.owner:
		return errLockLost
	}
	return nil
}

// Release stops the heartbeat and drops the lock, if it is still this
// process's.
func (l *Lock) Release(ctx context.Context) {
	close(l.stop)
	l.wg.Wait()
	if l.held(ctx) == nil {
		l.drop(ctx)
	}
}

func (l *Lock) drop(ctx context.Context) {
	if err := ExecDDL(ctx, l.c, "DROP TABLE IF EXISTS "+l.c.Names().Table(migrationLockTable)+l.c.Names().OnCluster()); err != nil {
		l.c.Log().Warn("migration lock not dropped; the next process takes it over after the lease", "err", l.c.Redact(err), "lease", l.lease.lease().String())
	}
}

// tableExists reports whether err says the table exists already.
func tableExists(err error) bool { return exceptionCode(err, tableAlreadyExists) }

// unknownTable reports whether err says the table does not exist, or is
// being dropped as the statement reads it.
func unknownTable(err error) bool {
	return exceptionCode(err, unknownTableCode) || exceptionCode(err, tableIsDropped)
}

// exceptionCode reports whether err is the server's exception code, or
// an ON CLUSTER statement's report of a host's (see alreadyDone).
func exceptionCode(err error, code int32) bool {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) {
		return false
	}
	return ex.Code == code || strings.Contains(ex.Message, fmt.Sprintf("Code: %d,", code))
}
