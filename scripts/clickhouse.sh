#!/usr/bin/env bash
# A private, project-local ClickHouse server for tests and the demo: a current
# release by default, or Debian's 18.16 (the oldest readsync supports).
#
# Usage: scripts/clickhouse.sh ensure|stop|status|lacks|query SQL
#
#   ensure      make a ClickHouse reachable; print ONLY its native DSN on stdout
#   lacks       print what the tests must not expect of the server `ensure` gives
#               (sinktest's capabilities, comma-separated; empty for none)
#   stop        stop the private instance (if running); always exits 0
#   status      say whether the private instance runs; exit 0 if it does, else 1
#   query SQL   run SQL and print the result (non-zero exit + server error on failure)
#
# Environment:
#   READSYNC_CLICKHOUSE_RELEASE    which server: `current` (default) or `18.16`
#   READSYNC_TEST_CLICKHOUSE_DSN   bring your own server: `ensure` prints this DSN, `query` uses it
#   READSYNC_CLICKHOUSE_DIR        state dir (default: <repo>/.tmp/clickhouse for 18.16,
#                                  <repo>/.tmp/clickhouse-current for current)
#   READSYNC_CLICKHOUSE_TCP_PORT   native port (default 19000 for 18.16, 19300 for current)
#   READSYNC_CLICKHOUSE_HTTP_PORT  HTTP port (default 18123 for 18.16, 18323 for current)
#   READSYNC_CLICKHOUSE_SERVER_BIN path to clickhouse-server 18.16 (skips the search)
#   READSYNC_NO_INSTALL=1          never install packages (apt-get, npm)
#
# The current release is ClickHouse 26.7 as chDB builds it (the npm package
# @chdb/lib-linux-x64-gnu, the engine as a shared library): `ensure` fetches the
# package with npm into .tmp when it is missing, builds the small launcher in
# scripts/chserve with cc, and starts it. Its native port serves clickhouse-go and
# clickhouse-client like any server; docs/clickhouse.md says what this build cannot do.
# For it `ensure` also configures the cluster readsync_ddl_check (this one server,
# with scripts/cluster.sh's ZooKeeper), on which tests execute the cluster-mode DDL.
#
# All chatter goes to stderr. The system instance (/etc/clickhouse-server, ports 9000/8123)
# is never used or modified.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/server.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/server.sh"

RELEASE="${READSYNC_CLICKHOUSE_RELEASE:-current}"
case "$RELEASE" in
current)
	STATE_DIR="${READSYNC_CLICKHOUSE_DIR:-$REPO/.tmp/clickhouse-current}"
	TCP_PORT="${READSYNC_CLICKHOUSE_TCP_PORT:-19300}"
	HTTP_PORT="${READSYNC_CLICKHOUSE_HTTP_PORT:-18323}"
	;;
18.16)
	STATE_DIR="${READSYNC_CLICKHOUSE_DIR:-$REPO/.tmp/clickhouse}"
	TCP_PORT="${READSYNC_CLICKHOUSE_TCP_PORT:-19000}"
	HTTP_PORT="${READSYNC_CLICKHOUSE_HTTP_PORT:-18123}"
	;;
*)
	echo "clickhouse.sh: READSYNC_CLICKHOUSE_RELEASE=\"$RELEASE\": expected current or 18.16" >&2
	exit 2
	;;
esac
# The chDB build of the current release, pinned: its engine is ClickHouse 26.7.2.1.
CHDB_PACKAGE="@chdb/lib-linux-x64-gnu@26.7.3-stable.1"
CHDB_DIR="$REPO/.tmp/chdb-26.7.3-stable.1"
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

# install_chdb: fetch the pinned chDB package with npm unless it is there.
install_chdb() {
	[[ -f "$CHDB_DIR/package/libchdb.so" ]] && return 0
	[[ "${READSYNC_NO_INSTALL:-}" != 1 ]] || missing "the current release ($CHDB_PACKAGE) is not in $CHDB_DIR, and READSYNC_NO_INSTALL=1"
	command -v npm >/dev/null 2>&1 || install_packages npm
	log "fetching $CHDB_PACKAGE with npm (about 180 MB)"
	mkdir -p "$CHDB_DIR"
	local tgz
	tgz="$(cd "$CHDB_DIR" && npm pack --silent "$CHDB_PACKAGE" 2>/dev/null | tail -n 1)" ||
		missing "npm pack $CHDB_PACKAGE failed"
	tar -xzf "$CHDB_DIR/$tgz" -C "$CHDB_DIR" package/libchdb.so && rm -f "$CHDB_DIR/$tgz"
	[[ -f "$CHDB_DIR/package/libchdb.so" ]] || missing "$CHDB_PACKAGE has no package/libchdb.so"
}

# build_chserve: compile the launcher into the state dir when its source is newer.
build_chserve() {
	local src="$REPO/scripts/chserve/chserve.c" bin="$STATE_DIR/chserve"
	mkdir -p "$STATE_DIR"
	[[ -x "$bin" && "$bin" -nt "$src" ]] && return 0
	command -v cc >/dev/null 2>&1 || install_packages gcc libc6-dev
	cc -O2 -Wall -o "$bin" "$src" -ldl || die "cannot build $src"
}

# write_current_config: the current release's config. clickhouse-local takes
# its ports and data path as arguments; this file adds the users and the DDL
# check cluster (this server alone, replicated through ZooKeeper).
write_current_config() {
	mkdir -p "$STATE_DIR"/{data,log}
	write_users_config "$STATE_DIR" </dev/null
	cat >"$STATE_DIR/config.xml" <<-EOF
		<?xml version="1.0"?>
		<!-- Written by scripts/${SCRIPT}; regenerated on every start. -->
		<clickhouse>
		    <logger>
		        <level>warning</level>
		        <log>${STATE_DIR}/log/clickhouse-server.log</log>
		        <errorlog>${STATE_DIR}/log/clickhouse-server.err.log</errorlog>
		    </logger>
		    <users_config>${STATE_DIR}/users.xml</users_config>
		$(zookeeper_xml)
		    <remote_servers>
		        <readsync_ddl_check>
		            <shard>
		                <internal_replication>true</internal_replication>
		                <replica><host>127.0.0.1</host><port>${TCP_PORT}</port></replica>
		            </shard>
		        </readsync_ddl_check>
		    </remote_servers>
		    <macros>
		        <shard>01</shard>
		        <replica>current</replica>
		    </macros>
		</clickhouse>
	EOF
}

# clean_current_tmp: remove what earlier runs of the current release left.
# The library keeps its databases in a directory of its own under TMPDIR
# (clickhouse-local-<uuid>, whatever --path says), new at each start and
# removed only by a clean exit, which a stopped server never makes: each
# start would leave the last run's test data behind. The server runs with
# TMPDIR in the state directory, and the directories there go before a start
# and after a stop; its databases do not outlive it.
clean_current_tmp() {
	rm -rf "$STATE_DIR/tmp"
	mkdir -p "$STATE_DIR/tmp"
}

# ensure_current: make the current release answer on HTTP_PORT.
ensure_current() {
	local pid
	if ping_clickhouse "$HTTP_PORT"; then
		return 0
	elif pid="$(clickhouse_pid "$STATE_DIR")"; then
		log "ClickHouse (current) (pid $pid) is running but not answering yet; waiting"
		wait_for "ClickHouse (current)" "$STATE_DIR/clickhouse-server.pid" ping_clickhouse "$HTTP_PORT" || exit 1
		return 0
	fi
	install_chdb
	build_chserve
	write_current_config
	clean_current_tmp
	log "starting ClickHouse (current, $CHDB_PACKAGE; state in $STATE_DIR, HTTP port $HTTP_PORT)"
	# The last statement keeps the listeners open: one row a second for 30 years.
	start_daemon "ClickHouse (current)" "$STATE_DIR/clickhouse-server.pid" ping_clickhouse "$HTTP_PORT" -- \
		env TMPDIR="$STATE_DIR/tmp" "$STATE_DIR/chserve" "$CHDB_DIR/package/libchdb.so" \
		--path="$STATE_DIR/data" --config-file="$STATE_DIR/config.xml" \
		--tcp_port="$TCP_PORT" --http_port="$HTTP_PORT" --listen_host=127.0.0.1 --multiquery \
		--query="SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; SELECT sleepEachRow(1) FROM numbers(1000000000) SETTINGS max_block_size = 1 FORMAT Null"
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
	if [[ "$RELEASE" == current ]]; then
		ensure_current
		echo "$DSN"
		return
	fi
	# Another `ensure` may have started it while we waited for the lock, or a server
	# from an earlier run may still be starting: install only when there is none.
	ping_clickhouse "$HTTP_PORT" || clickhouse_pid "$STATE_DIR" >/dev/null || install_missing
	ensure_clickhouse clickhouse-server "$STATE_DIR" "$HTTP_PORT" write_config
	echo "$DSN"
}

cmd_stop() {
	stop_clickhouse clickhouse-server "$STATE_DIR" "$HTTP_PORT"
	if [[ "$RELEASE" == current ]] && ! clickhouse_pid "$STATE_DIR" >/dev/null; then
		clean_current_tmp
	fi
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
	# Pretty* formats: colours only on a terminal, as http_query does.
	local color=0
	[[ -t 1 ]] && color=1
	clickhouse-client --host "$host" --port "$port" --user "${user:-default}" \
		--password "$pass" --database "${db:-default}" --output_format_pretty_color="$color" --query "$sql"
}

cmd_query() {
	[[ $# -ge 1 ]] || die "usage: $0 query SQL"
	if [[ -n "${READSYNC_TEST_CLICKHOUSE_DSN:-}" && "$READSYNC_TEST_CLICKHOUSE_DSN" != "$DSN" ]]; then
		query_external "$1"
		return
	fi
	http_query ClickHouse "$HTTP_PORT" "$1"
}

# cmd_lacks: the capabilities (see sink/sinktest) the server lacks. A server of
# one's own is not known here: READSYNC_TEST_CLICKHOUSE_LACKS says.
cmd_lacks() {
	if [[ -n "${READSYNC_TEST_CLICKHOUSE_DSN:-}" ]]; then
		echo "${READSYNC_TEST_CLICKHOUSE_LACKS:-}"
	elif [[ "$RELEASE" == current ]]; then
		# chDB's build aborts on a failed native login, and when a killed
		# client resets its connection.
		echo survives-failed-login,survives-killed-client
	else
		# 18.16 has no insert deduplication tokens.
		echo dedup-tokens
	fi
}

case "${1:-}" in
ensure) cmd_ensure ;;
lacks) cmd_lacks ;;
stop) cmd_stop ;;
status) cmd_status ;;
query) shift; cmd_query "$@" ;;
*)
	echo "usage: $0 ensure|stop|status|lacks|query SQL" >&2
	exit 2
	;;
esac
