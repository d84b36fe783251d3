# shellcheck shell=bash
# What scripts/clickhouse.sh and scripts/cluster.sh share: finding, installing,
# configuring, starting, waiting for and stopping the private servers they run.
# Sourced, never run.
#
# The sourcing script sets START_TIMEOUT (seconds a starting server has to answer)
# and defines `missing MESSAGE`, which says how to get the servers and exits 1.
# It sets SCRIPT (the name of the running script) and REPO (the checkout).
#
# All chatter goes to stderr: stdout is left to what a command prints on purpose.

SCRIPT="$(basename "$0")"
# shellcheck disable=SC2034 # read by the sourcing script
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# ZK_PORT is the client port of the ZooKeeper scripts/cluster.sh runs, which
# the cluster's nodes and the current release's DDL check cluster use.
ZK_PORT=12181

# zookeeper_xml: the <zookeeper> section of a server config for that ZooKeeper.
zookeeper_xml() {
	printf '<zookeeper><node><host>127.0.0.1</host><port>%s</port></node></zookeeper>' "$ZK_PORT"
}

log() { printf '%s: %s\n' "$SCRIPT" "$*" >&2; }
die() { log "$@"; exit 1; }

# http_get PORT PATH: print the body of a GET from 127.0.0.1:PORT, or nothing. A fresh
# machine may lack curl; python3 is there, and bash alone gets the body's last line.
http_get() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsS --max-time 2 "http://127.0.0.1:$1$2" 2>/dev/null || true
	elif command -v python3 >/dev/null 2>&1; then
		python3 -c 'import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=2).read().decode())' \
			"http://127.0.0.1:$1$2" 2>/dev/null || true
	else
		# shellcheck disable=SC2016 # $1 and $2 expand in the inner bash
		timeout 2 bash -c '
			exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
			printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3
			cat <&3' _ "$1" "$2" 2>/dev/null | tail -n 1 || true
	fi
}

# ping_clickhouse HTTP_PORT: succeed when the server answers /ping with "Ok.".
ping_clickhouse() { [[ "$(http_get "$1" /ping)" == Ok.* ]]; }

# running_pid FILE WORD: the pid in FILE if that process is alive and its
# command line contains WORD.
running_pid() {
	local file="$1" word="$2" pid
	[[ -f "$file" ]] || return 1
	pid="$(cat "$file" 2>/dev/null || true)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$word" || return 1
	echo "$pid"
}

# clickhouse_pid DIR: the pid of the server whose state is in DIR, if it runs: an
# 18.16 clickhouse-server, or the current release's launcher chserve, whose command
# line names clickhouse only when DIR does.
clickhouse_pid() { running_pid "$1/clickhouse-server.pid" 'clickhouse\|chserve'; }

# find_server: print the path of clickhouse-server, or nothing.
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

# install_packages PKG...: install PKGs with apt-get, or say why not (missing) and exit.
install_packages() {
	can_install || missing "$* missing, and installing is not possible here: needs root or passwordless sudo, apt-get, and READSYNC_NO_INSTALL unset"
	log "installing $* with apt-get"
	{ as_root apt-get update >&2 &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >&2; } ||
		missing "apt-get install $* failed"
}

# lock FILE: take FILE's lock on fd 9 until the script exits, so that commands
# which start or stop servers take turns.
lock() {
	mkdir -p "$(dirname "$1")"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$1"
		flock -w 300 9 || die "timed out waiting for the lock $1"
	fi
}

# show_logs DIR: the last lines of the server's output and error log in DIR.
show_logs() {
	local f
	for f in "$1"/*.out "$1"/log/*.err.log; do
		if [[ -s "$f" ]]; then
			log "last lines of $f:"
			tail -n 25 "$f" >&2
		fi
	done
}

# wait_for NAME PID_FILE CHECK...: wait until CHECK succeeds. Fail, showing the
# logs next to PID_FILE, when the process dies or START_TIMEOUT passes.
wait_for() {
	local name="$1" pid_file="$2" pid i
	shift 2
	pid="$(cat "$pid_file")"
	for ((i = 0; i < ${START_TIMEOUT:?} * 4; i++)); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.25
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "$name (pid $pid) did not answer within ${START_TIMEOUT}s"
	else
		log "$name (pid $pid) exited during startup"
	fi
	show_logs "$(dirname "$pid_file")"
	return 1
}

# start_daemon NAME PID_FILE CHECK... -- CMD...: start CMD in its own session from
# the directory of PID_FILE, its output in the .out file beside PID_FILE, and wait
# until CHECK succeeds. If it does not, kill CMD and exit.
start_daemon() {
	local name="$1" pid_file="$2" check=()
	shift 2
	while [[ "$1" != -- ]]; do
		check+=("$1")
		shift
	done
	shift
	# The server writes a few files (e.g. status, preprocessed configs) into the directory it runs from.
	# 9>&-: the server must not inherit (and so keep holding) the lock taken by ensure.
	(cd "$(dirname "$pid_file")" && exec setsid "$@" >"${pid_file%.pid}.out" 2>&1 </dev/null 9>&-) &
	echo "$!" >"$pid_file"
	if ! wait_for "$name" "$pid_file" "${check[@]}"; then
		kill -KILL "$(cat "$pid_file")" 2>/dev/null || true
		rm -f "$pid_file"
		exit 1
	fi
	log "$name is up (pid $(cat "$pid_file"))"
}

# stop_pid NAME PID: TERM, wait up to 30s, then KILL.
stop_pid() {
	local name="$1" pid="$2" i
	log "stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 120; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
	log "$name still running after 30s; sending KILL"
	kill -KILL "$pid" 2>/dev/null || true
}

# write_server_config DIR TCP_PORT HTTP_PORT MARK_CACHE_SIZE: write DIR/config.xml
# for a server with its state in DIR. Further elements come on stdin.
write_server_config() {
	local dir="$1" tcp_port="$2" http_port="$3" mark_cache_size="$4" extra
	extra="$(cat)"
	[[ -z "$extra" ]] || extra+=$'\n' # so that </yandex> keeps a line of its own
	mkdir -p "$dir"/{data,tmp,user_files,format_schemas,log}
	cat >"$dir/config.xml" <<-EOF
		<?xml version="1.0"?>
		<!-- Written by scripts/${SCRIPT}; regenerated on every start. -->
		<yandex>
		    <logger>
		        <level>warning</level>
		        <log>${dir}/log/clickhouse-server.log</log>
		        <errorlog>${dir}/log/clickhouse-server.err.log</errorlog>
		        <size>100M</size>
		        <count>2</count>
		    </logger>
		    <listen_host>127.0.0.1</listen_host>
		    <tcp_port>${tcp_port}</tcp_port>
		    <http_port>${http_port}</http_port>
		    <max_concurrent_queries>100</max_concurrent_queries>
		    <mark_cache_size>${mark_cache_size}</mark_cache_size>
		    <path>${dir}/data/</path>
		    <tmp_path>${dir}/tmp/</tmp_path>
		    <user_files_path>${dir}/user_files/</user_files_path>
		    <format_schema_path>${dir}/format_schemas/</format_schema_path>
		    <users_config>users.xml</users_config>
		    <default_profile>default</default_profile>
		    <default_database>default</default_database>
		    <!-- The server's own account of each statement that asks for it
		         (log_queries = 1): the per-statement cost tests read it. -->
		    <query_log>
		        <database>system</database>
		        <table>query_log</table>
		        <partition_by>toYYYYMM(event_date)</partition_by>
		        <flush_interval_milliseconds>1000</flush_interval_milliseconds>
		    </query_log>
		${extra}</yandex>
	EOF
}

# write_users_config DIR: write DIR/users.xml with two users without a password:
# default, whose profile's settings come on stdin, and readsync_reader, whose
# profile is read-only (no DDL, no INSERT): the tests' user without DDL rights.
write_users_config() {
	local dir="$1" settings
	settings="$(cat)"
	[[ -z "$settings" ]] || settings+=$'\n' # so that </default> keeps a line of its own
	cat >"$dir/users.xml" <<-EOF
		<?xml version="1.0"?>
		<!-- Written by scripts/${SCRIPT}; regenerated on every start. -->
		<yandex>
		    <profiles>
		        <default>
		${settings}        </default>
		        <reader>
		            <readonly>1</readonly>
		        </reader>
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
		        <readsync_reader>
		            <password></password>
		            <networks>
		                <ip>::/0</ip>
		                <ip>127.0.0.1</ip>
		            </networks>
		            <profile>reader</profile>
		            <quota>default</quota>
		        </readsync_reader>
		    </users>
		    <quotas>
		        <default/>
		    </quotas>
		</yandex>
	EOF
}

# ensure_clickhouse NAME DIR HTTP_PORT WRITE_CONFIG...: make the server with its
# state in DIR answer: wait for it if it runs already, else run WRITE_CONFIG and start it.
ensure_clickhouse() {
	local name="$1" dir="$2" http_port="$3" pid bin
	shift 3
	if ping_clickhouse "$http_port"; then
		return 0
	elif pid="$(clickhouse_pid "$dir")"; then
		log "$name (pid $pid) is running but not answering yet; waiting"
		wait_for "$name" "$dir/clickhouse-server.pid" ping_clickhouse "$http_port" || exit 1
		return 0
	fi
	bin="$(find_server)"
	[[ -n "$bin" ]] || missing "no clickhouse-server found"
	"$@"
	log "starting $name: $bin (state in $dir, HTTP port $http_port)"
	start_daemon "$name" "$dir/clickhouse-server.pid" ping_clickhouse "$http_port" -- \
		"$bin" --config-file="$dir/config.xml"
}

# stop_clickhouse NAME DIR HTTP_PORT: stop the server with its state in DIR, if it
# runs. A server on HTTP_PORT started from elsewhere is left alone.
stop_clickhouse() {
	local name="$1" dir="$2" http_port="$3" pid
	if pid="$(clickhouse_pid "$dir")"; then
		stop_pid "$name" "$pid"
	elif ping_clickhouse "$http_port"; then
		log "a server answers on port $http_port but it was not started from $dir; leaving it alone"
	else
		log "$name is not running"
	fi
	rm -f "$dir/clickhouse-server.pid"
}

# http_query NAME HTTP_PORT SQL: run SQL over HTTP and print the result; on an
# error, print the server's message to stderr and exit 1.
http_query() {
	local name="$1" http_port="$2" sql="$3" code color=0
	command -v curl >/dev/null 2>&1 || die "curl is needed for 'query'"
	# Pretty* formats: colours only on a terminal (no escape codes in logs or CI output).
	[[ -t 1 ]] && color=1
	BODY_FILE="$(mktemp)"
	trap 'rm -f "$BODY_FILE"' EXIT
	code="$(curl -sS -o "$BODY_FILE" -w '%{http_code}' --data-binary "$sql" \
		"http://127.0.0.1:${http_port}/?output_format_pretty_color=${color}")" ||
		die "cannot reach $name on port $http_port (run: $0 ensure)"
	if [[ "$code" != 200 ]]; then
		cat "$BODY_FILE" >&2
		exit 1
	fi
	cat "$BODY_FILE"
}
