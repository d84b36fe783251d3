package chconn

import (
	"context"
	"time"
)

// batchContext is the context to prepare a batch of the driver on: one
// that ends with ctx while the batch is sent, and never after release,
// which the caller calls as soon as Send has returned.
//
// The driver closes a batch's connection when the batch's context ends
// during Send, which is the one way to interrupt a write. Its watchdog
// goroutine can still see the context end after Send has returned and put
// the connection back in the pool: a cancel deferred by the caller, run
// as the function that wrote returns, then closes a connection that
// already serves the next statement, which fails with "use of closed
// network connection" (and the chDB build of the current release, seeing
// the reset mid-statement, aborts). Cut off from ctx once Send is done,
// the batch's context never ends then.
//
// The context keeps ctx's deadline, which the driver sets on the socket,
// and its values, which carry the settings and external data.
func batchContext(ctx context.Context) (bctx context.Context, release func()) {
	own, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	d, ok := ctx.Deadline()
	return withDeadline{Context: own, deadline: d, ok: ok}, func() { stop() }
}

// withDeadline reports a deadline it does not enforce: the context it
// wraps ends when the one the deadline came from does.
type withDeadline struct {
	context.Context
	deadline time.Time
	ok       bool
}

func (c withDeadline) Deadline() (time.Time, bool) { return c.deadline, c.ok }
