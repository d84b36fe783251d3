#!/usr/bin/env bash
# A private, project-local ClickHouse server for tests and the demo.
#
# Usage: scripts/clickhouse.sh ensure|stop|status|query SQL
#
#   ensure      make a ClickHouse reachable; print ONLY its native DSN on stdout
#   stop        stop the private instance (if running); always exits 0
#   status      say whether the private instance runs; exit 0 if it does, else 1
#   query SQL   run SQL and print the result (non-zero exit + server error on failure)
#
# Environment:
#   READSYNC_TEST_CLICKHOUSE_DSN   bring your own server: `ensure` prints this DSN, `query` uses it
#   READSYNC_CLICKHOUSE_DIR        state dir (default: <repo>/.tmp/clickhouse)
#   READSYNC_CLICKHOUSE_TCP_PORT   native port (default 19000)
#   READSYNC_CLICKHOUSE_HTTP_PORT  HTTP port (default 18123)
#   READSYNC_CLICKHOUSE_SERVER_BIN path to clickhouse-server (skips the search)
#   READSYNC_NO_INSTALL=1          never install clickhouse-server with apt-get
#
# All chatter goes to stderr. The system instance (/etc/clickhouse-server, ports 9000/8123)
# is never used or modified.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/server.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/server.sh"

STATE_DIR="${READSYNC_CLICKHOUSE_DIR:-$REPO/.tmp/clickhouse}"
TCP_PORT="${READSYNC_CLICKHOUSE_TCP_PORT:-19000}"
HTTP_PORT="${READSYNC_CLICKHOUSE_HTTP_PORT:-18123}"
DSN="clickhouse://default:@127.0.0.1:${TCP_PORT}/default"
START_TIMEOUT=60

missing() {
	cat >&2 <<-EOF
		clickhouse.sh: $1.
		Do one of these:
		  * install it:  sudo apt-get update && sudo apt-get install -y clickhouse-server clickhouse-client
		    (then run this again; it starts a private instance on 127.0.0.1:${TCP_PORT}), or
		  * point the tests at a reachable server's native DSN:
		      export READSYNC_TEST_CLICKHOUSE_DSN='clickhouse://default:@HOST:9000/default'
	EOF
	exit 1
}

install_missing() {
	[[ -z "$(find_server)" ]] || return 0
	install_packages clickhouse-server clickhouse-client
	[[ -n "$(find_server)" ]] || missing "clickhouse-server still missing after apt-get install"
}

write_config() {
	write_server_config "$STATE_DIR" "$TCP_PORT" "$HTTP_PORT" 268435456 </dev/null
	write_users_config "$STATE_DIR" </dev/null
}

cmd_ensure() {
	if [[ -n "${READSYNC_TEST_CLICKHOUSE_DSN:-}" ]]; then
		echo "$READSYNC_TEST_CLICKHOUSE_DSN"
		return
	fi
	if ping_clickhouse "$HTTP_PORT"; then
		echo "$DSN"
		return
	fi

	lock "$STATE_DIR/.lock"
	# Another `ensure` may have started it while we waited for the lock, or a server
	# from an earlier run may still be starting: install only when there is none.
	ping_clickhouse "$HTTP_PORT" || clickhouse_pid "$STATE_DIR" >/dev/null || install_missing
	ensure_clickhouse clickhouse-server "$STATE_DIR" "$HTTP_PORT" write_config
	echo "$DSN"
}

cmd_stop() {
	stop_clickhouse clickhouse-server "$STATE_DIR" "$HTTP_PORT"
}

cmd_status() {
	local pid
	if ping_clickhouse "$HTTP_PORT"; then
		echo "running: $DSN"
		return 0
	fi
	if pid="$(clickhouse_pid "$STATE_DIR")"; then
		echo "starting or not responding (pid $pid): $DSN"
	else
		echo "not running"
	fi
	return 1
}

# query via clickhouse-client against READSYNC_TEST_CLICKHOUSE_DSN (user:pass@host:port/db).
query_external() {
	local sql="$1" rest userinfo hostport db host port user pass
	command -v clickhouse-client >/dev/null 2>&1 ||
		die "READSYNC_TEST_CLICKHOUSE_DSN is set but clickhouse-client is not installed"
	rest="${READSYNC_TEST_CLICKHOUSE_DSN#*://}"
	rest="${rest%%\?*}"
	userinfo=""
	if [[ "$rest" == *@* ]]; then
		userinfo="${rest%%@*}"
		rest="${rest#*@}"
	fi
	hostport="${rest%%/*}"
	db=""
	[[ "$rest" == */* ]] && db="${rest#*/}"
	host="${hostport%:*}"
	port="${hostport##*:}"
	[[ "$hostport" == *:* ]] || port=9000
	user="${userinfo%%:*}"
	pass=""
	[[ "$userinfo" == *:* ]] && pass="${userinfo#*:}"
	clickhouse-client --host "$host" --port "$port" --user "${user:-default}" \
		--password "$pass" --database "${db:-default}" --query "$sql"
}

cmd_query() {
	[[ $# -ge 1 ]] || die "usage: $0 query SQL"
	if [[ -n "${READSYNC_TEST_CLICKHOUSE_DSN:-}" && "$READSYNC_TEST_CLICKHOUSE_DSN" != "$DSN" ]]; then
		query_external "$1"
		return
	fi
	http_query ClickHouse "$HTTP_PORT" "$1"
}

case "${1:-}" in
ensure) cmd_ensure ;;
stop) cmd_stop ;;
status) cmd_status ;;
query) shift; cmd_query "$@" ;;
*)
	echo "usage: $0 ensure|stop|status|query SQL" >&2
	exit 2
	;;
esac
