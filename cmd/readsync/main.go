// Command readsync exports the messaging platform's project and message read
// statistics into ClickHouse: as a daemon on cron schedules, or as a one-off
// backfill. The program is package app; main supplies the process's context,
// arguments, environment and streams, and its exit code.
package main

import (
	"os"

	"github.com/readsync/readsync/internal/app"
)

// Stamped at build time with -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(app.Main(app.Build{Version: version, Commit: commit}))
}
