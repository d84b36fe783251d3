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

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${READSYNC_CLICKHOUSE_DIR:-$REPO/.tmp/clickhouse}"
TCP_PORT="${READSYNC_CLICKHOUSE_TCP_PORT:-19000}"
HTTP_PORT="${READSYNC_CLICKHOUSE_HTTP_PORT:-18123}"
DSN="clickhouse://default:@127.0.0.1:${TCP_PORT}/default"
PID_FILE="$STATE_DIR/clickhouse-server.pid"
LOCK_FILE="$STATE_DIR/.lock"
START_TIMEOUT=60

log() { printf 'clickhouse.sh: %s\n' "$*" >&2; }
die() { log "$@"; exit 1; }

# ping: succeed when the private instance answers /ping with "Ok.".
ping_server() {
	local body=""
	if command -v curl >/dev/null 2>&1; then
		body="$(curl -fsS --max-time 2 "http://127.0.0.1:${HTTP_PORT}/ping" 2>/dev/null || true)"
	elif command -v python3 >/dev/null 2>&1; then
		body="$(python3 -c 'import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=2).read().decode())' \
			"http://127.0.0.1:${HTTP_PORT}/ping" 2>/dev/null || true)"
	else
		# shellcheck disable=SC2016 # $1 expands in the inner bash
		body="$(timeout 2 bash -c '
			exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
			printf "GET /ping HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
			cat <&3' _ "$HTTP_PORT" 2>/dev/null | tail -n 1 || true)"
	fi
	[[ "$body" == Ok.* ]]
}

# pid of the private server from the pid file, if that process is alive and is ClickHouse.
running_pid() {
	local pid
	[[ -f "$PID_FILE" ]] || return 1
	pid="$(cat "$PID_FILE" 2>/dev/null || true)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q clickhouse || return 1
	echo "$pid"
}

find_server() {
	if [[ -n "${READSYNC_CLICKHOUSE_SERVER_BIN:-}" ]]; then
		if [[ -x "$READSYNC_CLICKHOUSE_SERVER_BIN" ]]; then echo "$READSYNC_CLICKHOUSE_SERVER_BIN"; fi
		return 0
	fi
	local c
	for c in "$(command -v clickhouse-server 2>/dev/null || true)" /usr/sbin/clickhouse-server /usr/bin/clickhouse-server; do
		if [[ -n "$c" && -x "$c" ]]; then
			echo "$c"
			return
		fi
	done
}

# as_root CMD...: run CMD as root (directly, or with passwordless sudo).
as_root() {
	if [[ "$(id -u)" -eq 0 ]]; then
		"$@"
	else
		sudo -n "$@"
	fi
}

can_install() {
	[[ "${READSYNC_NO_INSTALL:-}" != 1 ]] || return 1
	command -v apt-get >/dev/null 2>&1 || return 1
	[[ "$(id -u)" -eq 0 ]] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }
}

install_server() {
	log "clickhouse-server not found; installing it with apt-get"
	as_root apt-get update >&2 &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y clickhouse-server clickhouse-client >&2
}

missing_server() {
	cat >&2 <<-EOF
		clickhouse.sh: no clickhouse-server found${1:+ ($1)}.
		Do one of these:
		  * install it:  sudo apt-get update && sudo apt-get install -y clickhouse-server clickhouse-client
		    (then run this again; it starts a private instance on 127.0.0.1:${TCP_PORT}), or
		  * point the tests at a reachable server's native DSN:
		      export READSYNC_TEST_CLICKHOUSE_DSN='clickhouse://default:@HOST:9000/default'
	EOF
	exit 1
}

write_config() {
	mkdir -p "$STATE_DIR"/{data,tmp,user_files,format_schemas,log}
	cat >"$STATE_DIR/config.xml" <<-EOF
		<?xml version="1.0"?>
		<!-- Written by scripts/clickhouse.sh; regenerated on every start. -->
		<yandex>
		    <logger>
		        <level>warning</level>
		        <log>${STATE_DIR}/log/clickhouse-server.log</log>
		        <errorlog>${STATE_DIR}/log/clickhouse-server.err.log</errorlog>
		        <size>100M</size>
		        <count>2</count>
		    </logger>
		    <listen_host>127.0.0.1</listen_host>
		    <tcp_port>${TCP_PORT}</tcp_port>
		    <http_port>${HTTP_PORT}</http_port>
		    <max_concurrent_queries>100</max_concurrent_queries>
		    <mark_cache_size>268435456</mark_cache_size>
		    <path>${STATE_DIR}/data/</path>
		    <tmp_path>${STATE_DIR}/tmp/</tmp_path>
		    <user_files_path>${STATE_DIR}/user_files/</user_files_path>
		    <format_schema_path>${STATE_DIR}/format_schemas/</format_schema_path>
		    <users_config>users.xml</users_config>
		    <default_profile>default</default_profile>
		    <default_database>default</default_database>
		</yandex>
	EOF
	cat >"$STATE_DIR/users.xml" <<-'EOF'
		<?xml version="1.0"?>
		<!-- Written by scripts/clickhouse.sh; regenerated on every start. -->
		<yandex>
		    <profiles>
		        <default/>
		    </profiles>
		    <users>
		        <default>
		            <password></password>
		            <networks>
		                <ip>::/0</ip>
		                <ip>127.0.0.1</ip>
		            </networks>
		            <profile>default</profile>
		            <quota>default</quota>
		        </default>
		    </users>
		    <quotas>
		        <default/>
		    </quotas>
		</yandex>
	EOF
}

show_logs() {
	local f
	for f in "$STATE_DIR/server.out" "$STATE_DIR/log/clickhouse-server.err.log"; do
		if [[ -s "$f" ]]; then
			log "last lines of $f:"
			tail -n 25 "$f" >&2
		fi
	done
}

# wait_for PID: wait until the server answers /ping, or the process dies, or the timeout.
wait_for() {
	local pid="$1" i
	for ((i = 0; i < START_TIMEOUT * 4; i++)); do
		ping_server && return 0
		kill -0 "$pid" 2>/dev/null || { log "clickhouse-server (pid $pid) exited during startup"; return 1; }
		sleep 0.25
	done
	log "clickhouse-server (pid $pid) did not answer on port ${HTTP_PORT} within ${START_TIMEOUT}s"
	return 1
}

start_server() {
	local bin pid
	bin="$(find_server)"
	if [[ -z "$bin" ]]; then
		can_install || missing_server "and installing it is not possible here: needs root or passwordless sudo, apt-get, and READSYNC_NO_INSTALL unset"
		install_server || missing_server "apt-get install clickhouse-server failed"
		bin="$(find_server)"
		[[ -n "$bin" ]] || missing_server "still missing after apt-get install"
	fi

	write_config
	log "starting $bin (state in $STATE_DIR, native port $TCP_PORT, HTTP port $HTTP_PORT)"
	# Run from the state dir: the server writes a few files (e.g. status, preprocessed configs) nearby.
	# 9>&-: the server must not inherit (and so keep holding) the lock taken by cmd_ensure.
	(cd "$STATE_DIR" && exec setsid "$bin" --config-file="$STATE_DIR/config.xml" \
		>"$STATE_DIR/server.out" 2>&1 </dev/null 9>&-) &
	pid=$!
	echo "$pid" >"$PID_FILE"
	if ! wait_for "$pid"; then
		show_logs
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$PID_FILE"
		exit 1
	fi
	log "clickhouse-server is up (pid $pid)"
}

cmd_ensure() {
	if [[ -n "${READSYNC_TEST_CLICKHOUSE_DSN:-}" ]]; then
		echo "$READSYNC_TEST_CLICKHOUSE_DSN"
		return
	fi
	if ping_server; then
		echo "$DSN"
		return
	fi

	mkdir -p "$STATE_DIR"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$LOCK_FILE"
		flock -w 300 9 || die "timed out waiting for the lock $LOCK_FILE"
	fi
	# Another `ensure` may have started it while we waited for the lock,
	# or a server from an earlier run may still be starting.
	local pid
	if ping_server; then
		:
	elif pid="$(running_pid)"; then
		log "clickhouse-server (pid $pid) is running but not answering yet; waiting"
		wait_for "$pid" || { show_logs; exit 1; }
	else
		start_server
	fi
	echo "$DSN"
}

cmd_stop() {
	local pid i
	if ! pid="$(running_pid)"; then
		rm -f "$PID_FILE"
		if ping_server; then
			log "a server answers on port $HTTP_PORT but it was not started from $STATE_DIR; leaving it alone"
		else
			log "not running"
		fi
		return 0
	fi
	log "stopping clickhouse-server (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 120; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.25
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "still running after 30s; sending KILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$PID_FILE"
	return 0
}

cmd_status() {
	local pid
	if ping_server; then
		echo "running: $DSN"
		return 0
	fi
	if pid="$(running_pid)"; then
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
	local sql="$1" code color=0
	if [[ -n "${READSYNC_TEST_CLICKHOUSE_DSN:-}" && "$READSYNC_TEST_CLICKHOUSE_DSN" != "$DSN" ]]; then
		query_external "$sql"
		return
	fi
	command -v curl >/dev/null 2>&1 || die "curl is needed for 'query'"
	# Pretty* formats: colours only on a terminal (no escape codes in logs or CI output).
	[[ -t 1 ]] && color=1
	BODY_FILE="$(mktemp)"
	trap 'rm -f "$BODY_FILE"' EXIT
	code="$(curl -sS -o "$BODY_FILE" -w '%{http_code}' --data-binary "$sql" \
		"http://127.0.0.1:${HTTP_PORT}/?output_format_pretty_color=${color}")" ||
		die "cannot reach ClickHouse on port $HTTP_PORT (run: $0 ensure)"
	if [[ "$code" != 200 ]]; then
		cat "$BODY_FILE" >&2
		exit 1
	fi
	cat "$BODY_FILE"
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
