// Command readsync exports the messaging platform's project and message read
// statistics into ClickHouse: as a daemon on cron schedules, or as a one-off
// backfill. The program is package app; main supplies the process's context,
// arguments, environment and streams, and its exit code.
package main

import (
	"os"

	"github.com/readsync/readsync/internal/app"
)

// commit is stamped by make build and make image, with -ldflags
// "-X main.commit=…", where the Go toolchain cannot see the checkout (a
// container build without .git); empty, the commit the toolchain recorded
// is used. The version is the VERSION file, which the binary embeds.
var commit string

func main() {
	os.Exit(app.Main(app.CurrentBuild(commit)))
}
