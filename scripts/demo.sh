#!/usr/bin/env bash
# make demo: run readsync end to end on this machine. Starts the project's fake
# upstream with sample projects whose read counts grow on every fetch, makes a
# local ClickHouse reachable, runs three backfills an hour apart, prints the
# read trend from ClickHouse, and verifies every view. make run (the argument
# daemon) runs the daemon against the same instead, a pass a minute.
#
# Its output goes to terminals and to logs alike: escape codes (bold headings,
# colours, the progress bar) appear only on a terminal.
set -euo pipefail

# say prints a heading on stderr, in bold on a terminal only.
say() {
	if [[ -t 2 ]]; then
		printf '\n\033[1m== %s\033[0m\n' "$*" >&2
	else
		printf '\n== %s\n' "$*" >&2
	fi
}

# setup makes a local ClickHouse reachable with an empty database $DB, starts
# the fake upstream with sample projects whose read counts grow on every
# fetch, writes a schedules file holding every sample name on the cron $1, and
# exports the environment that points readsync at both.
setup() {
	local cron="$1"
	REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
	cd "$REPO"
	rm -rf "$WORK"
	mkdir -p "$WORK"

	say "ClickHouse"
	base_dsn="$(scripts/clickhouse.sh ensure)"
	dsn="${base_dsn%/*}/$DB"
	scripts/clickhouse.sh query "DROP DATABASE IF EXISTS $DB" >/dev/null
	echo "using $dsn" >&2

	say "fake upstream"
	bin/fakeupstream -sample -growth 40 -client-id 1001 -client-secret demo-secret -url-file "$WORK/url" 2>"$WORK/fakeupstream.log" &
	fake_pid=$!
	trap 'kill "$fake_pid" 2>/dev/null || true' EXIT
	for _ in $(seq 100); do [[ -s "$WORK/url" ]] && break; sleep 0.1; done
	[[ -s "$WORK/url" ]] || { cat "$WORK/fakeupstream.log" >&2; echo "fake upstream did not start" >&2; exit 1; }
	url="$(cat "$WORK/url")"
	echo "serving sample projects at $url" >&2

	# A schedules file for the sample projects, one schedule holding every name.
	{
		echo "schedules:"
		echo "  - name: demo"
		echo "    cron: \"$cron\""
		echo "    nft_names:"
		bin/fakeupstream -sample -print-nft-names | while IFS= read -r name; do
			printf '      - "%s"\n' "$(printf '%s' "$name" | sed 's/\\/\\\\/g; s/"/\\"/g')"
		done
	} >"$WORK/schedules.yaml"

	export READSYNC_API_BASE_URL="$url"
	export READSYNC_CLIENT_ID=1001
	export READSYNC_CLIENT_SECRET=demo-secret
	export READSYNC_CLICKHOUSE_DSN="$dsn"
	export READSYNC_SCHEDULES_FILE="$WORK/schedules.yaml"
	export READSYNC_SPOOL_DIR="$WORK/spool"
	export READSYNC_LOG_FORMAT="${READSYNC_LOG_FORMAT:-text}"
}

# main: three backfills an hour apart, then the trend they make.
main() {
	WORK="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tmp/demo"
	DB="readsync_demo"
	setup "@hourly"

	say "readsync --check"
	bin/readsync --check

	# Three snapshots an hour apart, ending at the current hour; the fake's read
	# counts grow between them, which is the trend the table shows.
	hour="$(date -u +%Y-%m-%dT%H:00:00Z)"
	for back in 2 1 0; do
		at="$(date -u -d "$hour - $back hour" +%Y-%m-%dT%H:%M:%SZ)"
		say "readsync --backfill --snapshot-at $at"
		bin/readsync --backfill --snapshot-at "$at"
	done

	say "read trend per project (the project_read_snapshots view)"
	scripts/clickhouse.sh query "
	SELECT nft, snapshot_at, messages, reads, total, round(100 * read_rate, 2) AS read_rate_pct
	FROM $DB.project_read_snapshots
	ORDER BY nft, snapshot_at
	FORMAT PrettyCompactMonoBlock"

	say "reads gained per project since its previous snapshot (the project_read_gains view)"
	scripts/clickhouse.sh query "
	SELECT nft, snapshot_at, prev_snapshot_at, messages, new_messages, reads_gained, missed_ticks
	FROM $DB.project_read_gains
	ORDER BY nft, snapshot_at
	FORMAT PrettyCompactMonoBlock"

	say "passes recorded in sync_runs"
	scripts/clickhouse.sh query "
	SELECT snapshot_at, trigger, status, nft_ok, nft_failed, messages
	FROM $DB.sync_runs ORDER BY started_at, snapshot_at
	FORMAT PrettyCompactMonoBlock"

	say "readsync --verify: every view against its brute force"
	bin/readsync --verify

	echo >&2
	echo "Done. The rows stay in database $DB; explore with: scripts/clickhouse.sh query 'SELECT * FROM $DB.message_read_latest LIMIT 10'" >&2
}

# daemon: readsync as a daemon against the fake upstream, a pass every
# minute, until Ctrl-C; its health and metrics on 127.0.0.1:9090.
daemon() {
	WORK="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tmp/run"
	DB="readsync_local"
	setup "@every 1m"
	export READSYNC_HTTP_ADDR="${READSYNC_HTTP_ADDR:-127.0.0.1:9090}"
	say "readsync (the daemon; Ctrl-C stops it)"
	cat >&2 <<-EOF
		Watch a view fill up, a snapshot a minute, from another terminal:
		  scripts/clickhouse.sh query 'SELECT nft, snapshot_at, reads, total, round(100 * read_rate, 2) AS pct FROM $DB.project_read_snapshots ORDER BY snapshot_at DESC, nft LIMIT 10 FORMAT PrettyCompactMonoBlock'
		Its metrics: curl -s http://$READSYNC_HTTP_ADDR/metrics | grep ^readsync_passes_total
	EOF
	bin/readsync
}

# Sourced (by the tests), the script only defines its functions. Run, it
# runs the demo, or with the argument daemon the daemon.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	case "${1:-}" in
	daemon) daemon ;;
	"") main ;;
	*)
		echo "usage: $0 [daemon]" >&2
		exit 2
		;;
	esac
fi
