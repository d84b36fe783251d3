#!/usr/bin/env bash
# A private, project-local ClickHouse cluster for tests: one ZooKeeper and two
# clickhouse-server nodes on 127.0.0.1.
#
# Usage: scripts/cluster.sh ensure|stop|status|stop-node N|start-node N|query N SQL
#
#   ensure        make the cluster reachable; print ONLY the two nodes' native DSNs,
#                 comma-separated, on stdout
#   stop          stop both nodes and ZooKeeper (those that run); always exits 0
#   status        say what runs; exit 0 if everything does, else 1
#   stop-node N   stop node N (1 or 2); the rest keeps running
#   start-node N  start node N (1 or 2) and wait until it answers
#   query N SQL   run SQL on node N over HTTP and print the result
#
# Two clusters are defined on the same two nodes (remote_servers):
#   readsync_replicated  one shard, two replicas (node1, node2)
#   readsync_sharded     two shards of one replica each (node1, node2)
# Macros belong to nodes: node1 has shard=01, replica=node1; node2 shard=02,
# replica=node2. So the replicated topology needs a replica path without
# {shard} (e.g. /clickhouse/tables/replicated/{database}/{table}); the sharded
# one can use /clickhouse/tables/{shard}/{database}/{table}.
#
# Ports: ZooKeeper 12181; node N: native 1910N, HTTP 1911N, interserver 1912N.
#
# Environment:
#   READSYNC_TEST_CLUSTER_DSNS     bring your own cluster: `ensure` prints it and starts nothing
#   READSYNC_CLUSTER_DIR           state dir (default: <repo>/.tmp/cluster)
#   READSYNC_CLICKHOUSE_SERVER_BIN path to clickhouse-server (skips the search)
#   READSYNC_NO_INSTALL=1          never install packages with apt-get
#
# The ports are fixed, so one cluster runs per machine: a command finds the state dir
# of a cluster already running (started from another checkout, say) through its
# ZooKeeper's command line, and uses that one.
#
# All chatter goes to stderr. Apart from installing packages, nothing outside the state
# dir is written.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${READSYNC_CLUSTER_DIR:-$REPO/.tmp/cluster}"
ZK_PORT=12181
ZK_DIR="$STATE_DIR/zookeeper"
LOCK_FILE="$STATE_DIR/.lock"
START_TIMEOUT=90
NODES=(1 2)
ZK_CLASSPATH="/usr/share/java/*:/etc/zookeeper/conf"

tcp_port() { echo "1910$1"; }
http_port() { echo "1911$1"; }
interserver_port() { echo "1912$1"; }
node_dir() { echo "$STATE_DIR/node$1"; }
node_dsn() { echo "clickhouse://default:@127.0.0.1:$(tcp_port "$1")/default"; }

log() { printf 'cluster.sh: %s\n' "$*" >&2; }
die() { log "$@"; exit 1; }

dsns() {
	local n out=""
	for n in "${NODES[@]}"; do out="${out:+$out,}$(node_dsn "$n")"; done
	echo "$out"
}

# http_get PORT PATH: print the body of a GET, or nothing. A fresh machine
# may lack curl; python3 is there.
http_get() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsS --max-time 2 "http://127.0.0.1:$1$2" 2>/dev/null || true
	else
		python3 -c 'import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=2).read().decode())' \
			"http://127.0.0.1:$1$2" 2>/dev/null || true
	fi
}

ping_node() { [[ "$(http_get "$(http_port "$1")" /ping)" == Ok.* ]]; }

# ping_zk: ZooKeeper answers the four-letter word "ruok" with "imok".
ping_zk() {
	local reply
	# shellcheck disable=SC2016 # $1 expands in the inner bash
	reply="$(timeout 2 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf ruok >&3
		cat <&3' _ "$ZK_PORT" 2>/dev/null || true)"
	[[ "$reply" == imok ]]
}

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

# running_state_dir: the state dir of the cluster whose ZooKeeper, started by this
# script, serves ZK_PORT.
running_state_dir() {
	local f cfg
	for f in $(grep -lsa QuorumPeerMain /proc/[0-9]*/cmdline 2>/dev/null); do
		cfg="$(tr '\0' '\n' <"$f" 2>/dev/null | tail -n 1)"
		[[ "$cfg" == */zookeeper/zoo.cfg && -f "$cfg" ]] || continue
		grep -qx "clientPort=$ZK_PORT" "$cfg" || continue
		dirname "$(dirname "$cfg")"
		return 0
	done
	return 1
}

# adopt_running: use the state dir of the running cluster, if it is not ours. Stopping
# and starting a node must act on the processes and data that cluster uses.
adopt_running() {
	local dir
	zk_pid >/dev/null && return 0
	dir="$(running_state_dir)" || return 0
	[[ "$dir" != "$STATE_DIR" ]] || return 0
	log "using the running cluster's state in $dir"
	STATE_DIR="$dir"
	ZK_DIR="$STATE_DIR/zookeeper"
	LOCK_FILE="$STATE_DIR/.lock"
}

node_pid() { running_pid "$(node_dir "$1")/clickhouse-server.pid" clickhouse; }
zk_pid() { running_pid "$ZK_DIR/zookeeper.pid" QuorumPeerMain; }

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

have_zookeeper() { [[ -f /usr/share/java/zookeeper.jar ]] && command -v java >/dev/null 2>&1; }

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

missing() {
	cat >&2 <<-EOF
		cluster.sh: $1.
		Do one of these:
		  * install them:  sudo apt-get update && sudo apt-get install -y clickhouse-server clickhouse-client zookeeper
		    (then run this again; it starts ZooKeeper on 127.0.0.1:${ZK_PORT} and two nodes on 127.0.0.1:19101 and :19102), or
		  * point the tests at a reachable two-node cluster (see the comment at the top of $0):
		      export READSYNC_TEST_CLUSTER_DSNS='clickhouse://default:@HOST1:9000/default,clickhouse://default:@HOST2:9000/default'
	EOF
	exit 1
}

# install_missing: install clickhouse-server and ZooKeeper when either is absent.
install_missing() {
	local pkgs=()
	[[ -n "$(find_server)" ]] || pkgs+=(clickhouse-server clickhouse-client)
	have_zookeeper || pkgs+=(zookeeper)
	[[ ${#pkgs[@]} -gt 0 ]] || return 0
	can_install || missing "${pkgs[*]} missing, and installing is not possible here: needs root or passwordless sudo, apt-get, and READSYNC_NO_INSTALL unset"
	log "installing ${pkgs[*]} with apt-get"
	{ as_root apt-get update >&2 &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${pkgs[@]}" >&2; } ||
		missing "apt-get install ${pkgs[*]} failed"
	[[ -n "$(find_server)" ]] && have_zookeeper || missing "${pkgs[*]} still missing after apt-get install"
}

write_zk_config() {
	mkdir -p "$ZK_DIR/data"
	# forceSync=no and a small preAllocSize: a test cluster on a shared disk
	# trades durability for speed and space.
	cat >"$ZK_DIR/zoo.cfg" <<-EOF
		# Written by scripts/cluster.sh; regenerated on every start.
		tickTime=2000
		dataDir=$ZK_DIR/data
		clientPort=$ZK_PORT
		clientPortAddress=127.0.0.1
		admin.enableServer=false
		4lw.commands.whitelist=ruok
		forceSync=no
		preAllocSize=4096
		autopurge.snapRetainCount=3
		autopurge.purgeInterval=1
	EOF
}

write_node_config() {
	local n="$1" dir
	dir="$(node_dir "$n")"
	mkdir -p "$dir"/{data,tmp,user_files,format_schemas,log}
	cat >"$dir/config.xml" <<-EOF
		<?xml version="1.0"?>
		<!-- Written by scripts/cluster.sh; regenerated on every start. -->
		<yandex>
		    <logger>
		        <level>warning</level>
		        <log>${dir}/log/clickhouse-server.log</log>
		        <errorlog>${dir}/log/clickhouse-server.err.log</errorlog>
		        <size>100M</size>
		        <count>2</count>
		    </logger>
		    <listen_host>127.0.0.1</listen_host>
		    <tcp_port>$(tcp_port "$n")</tcp_port>
		    <http_port>$(http_port "$n")</http_port>
		    <interserver_http_port>$(interserver_port "$n")</interserver_http_port>
		    <interserver_http_host>127.0.0.1</interserver_http_host>
		    <max_concurrent_queries>100</max_concurrent_queries>
		    <mark_cache_size>67108864</mark_cache_size>
		    <uncompressed_cache_size>67108864</uncompressed_cache_size>
		    <path>${dir}/data/</path>
		    <tmp_path>${dir}/tmp/</tmp_path>
		    <user_files_path>${dir}/user_files/</user_files_path>
		    <format_schema_path>${dir}/format_schemas/</format_schema_path>
		    <users_config>users.xml</users_config>
		    <default_profile>default</default_profile>
		    <default_database>default</default_database>
		    <zookeeper>
		        <node>
		            <host>127.0.0.1</host>
		            <port>${ZK_PORT}</port>
		        </node>
		    </zookeeper>
		    <remote_servers>
		        <readsync_replicated>
		            <shard>
		                <internal_replication>true</internal_replication>
		                <replica><host>127.0.0.1</host><port>$(tcp_port 1)</port></replica>
		                <replica><host>127.0.0.1</host><port>$(tcp_port 2)</port></replica>
		            </shard>
		        </readsync_replicated>
		        <readsync_sharded>
		            <shard>
		                <internal_replication>true</internal_replication>
		                <replica><host>127.0.0.1</host><port>$(tcp_port 1)</port></replica>
		            </shard>
		            <shard>
		                <internal_replication>true</internal_replication>
		                <replica><host>127.0.0.1</host><port>$(tcp_port 2)</port></replica>
		            </shard>
		        </readsync_sharded>
		    </remote_servers>
		    <macros>
		        <shard>0${n}</shard>
		        <replica>node${n}</replica>
		    </macros>
		    <distributed_ddl>
		        <path>/clickhouse/task_queue/ddl</path>
		    </distributed_ddl>
		</yandex>
	EOF
	# distributed_ddl_task_timeout (180s by default) bounds how long an ON CLUSTER
	# statement waits for a stopped node: 60s lets such a test fail in reasonable time.
	# poll_interval (10s by default) is how often an idle connection checks for
	# shutdown: stop-node with a test's connection open would wait that long.
	cat >"$dir/users.xml" <<-'EOF'
		<?xml version="1.0"?>
		<!-- Written by scripts/cluster.sh; regenerated on every start. -->
		<yandex>
		    <profiles>
		        <default>
		            <distributed_ddl_task_timeout>60</distributed_ddl_task_timeout>
		            <poll_interval>1</poll_interval>
		        </default>
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
	for f in "$@"; do
		if [[ -s "$f" ]]; then
			log "last lines of $f:"
			tail -n 25 "$f" >&2
		fi
	done
}

# wait_for NAME PID CHECK...: wait until CHECK succeeds, or the process dies, or the timeout.
wait_for() {
	local name="$1" pid="$2" i
	shift 2
	for ((i = 0; i < START_TIMEOUT * 4; i++)); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || { log "$name (pid $pid) exited during startup"; return 1; }
		sleep 0.25
	done
	log "$name (pid $pid) did not answer within ${START_TIMEOUT}s"
	return 1
}

start_zk() {
	local pid
	write_zk_config
	log "starting ZooKeeper (state in $ZK_DIR, port $ZK_PORT)"
	# A small heap and the serial collector: the machine runs other servers too.
	# 9>&-: the server must not inherit (and so keep holding) the lock taken by ensure.
	(cd "$ZK_DIR" && exec setsid java -Xms32m -Xmx256m -XX:+UseSerialGC \
		-Dzookeeper.log.dir="$ZK_DIR" -cp "$ZK_CLASSPATH" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZK_DIR/zoo.cfg" \
		>"$ZK_DIR/zookeeper.out" 2>&1 </dev/null 9>&-) &
	pid=$!
	echo "$pid" >"$ZK_DIR/zookeeper.pid"
	if ! wait_for ZooKeeper "$pid" ping_zk; then
		show_logs "$ZK_DIR/zookeeper.out"
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$ZK_DIR/zookeeper.pid"
		exit 1
	fi
	log "ZooKeeper is up (pid $pid)"
}

ensure_zk() {
	local pid
	if ping_zk; then
		return
	elif pid="$(zk_pid)"; then
		log "ZooKeeper (pid $pid) is running but not answering yet; waiting"
		wait_for ZooKeeper "$pid" ping_zk || { show_logs "$ZK_DIR/zookeeper.out"; exit 1; }
	else
		start_zk
	fi
}

start_node() {
	local n="$1" bin dir pid
	bin="$(find_server)"
	[[ -n "$bin" ]] || missing "no clickhouse-server found"
	dir="$(node_dir "$n")"
	write_node_config "$n"
	log "starting node$n: $bin (state in $dir, native port $(tcp_port "$n"), HTTP port $(http_port "$n"))"
	(cd "$dir" && exec setsid "$bin" --config-file="$dir/config.xml" \
		>"$dir/server.out" 2>&1 </dev/null 9>&-) &
	pid=$!
	echo "$pid" >"$dir/clickhouse-server.pid"
	if ! wait_for "node$n" "$pid" ping_node "$n"; then
		show_logs "$dir/server.out" "$dir/log/clickhouse-server.err.log"
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$dir/clickhouse-server.pid"
		exit 1
	fi
	log "node$n is up (pid $pid)"
}

ensure_node() {
	local n="$1" pid
	if ping_node "$n"; then
		return
	elif pid="$(node_pid "$n")"; then
		log "node$n (pid $pid) is running but not answering yet; waiting"
		wait_for "node$n" "$pid" ping_node "$n" ||
			{ show_logs "$(node_dir "$n")/log/clickhouse-server.err.log"; exit 1; }
	else
		start_node "$n"
	fi
}

# lock: serialise commands that start or stop processes.
lock() {
	mkdir -p "$STATE_DIR"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$LOCK_FILE"
		flock -w 300 9 || die "timed out waiting for the lock $LOCK_FILE"
	fi
}

all_up() {
	local n
	ping_zk || return 1
	for n in "${NODES[@]}"; do ping_node "$n" || return 1; done
}

cmd_ensure() {
	if [[ -n "${READSYNC_TEST_CLUSTER_DSNS:-}" ]]; then
		echo "$READSYNC_TEST_CLUSTER_DSNS"
		return
	fi
	if all_up; then
		dsns
		return
	fi
	lock
	install_missing
	ensure_zk
	local n
	for n in "${NODES[@]}"; do ensure_node "$n"; done
	dsns
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

stop_node() {
	local n="$1" pid
	if pid="$(node_pid "$n")"; then
		stop_pid "node$n" "$pid"
	elif ping_node "$n"; then
		log "a server answers on port $(http_port "$n") but it was not started from $(node_dir "$n"); leaving it alone"
	fi
	rm -f "$(node_dir "$n")/clickhouse-server.pid"
}

cmd_stop() {
	local n pid
	lock
	for n in "${NODES[@]}"; do stop_node "$n"; done
	if pid="$(zk_pid)"; then
		stop_pid ZooKeeper "$pid"
	fi
	rm -f "$ZK_DIR/zookeeper.pid"
	return 0
}

cmd_status() {
	local n ok=0
	if ping_zk; then echo "zookeeper: running on 127.0.0.1:$ZK_PORT"; else echo "zookeeper: not running"; ok=1; fi
	for n in "${NODES[@]}"; do
		if ping_node "$n"; then
			echo "node$n: running: $(node_dsn "$n")"
		else
			echo "node$n: not running"
			ok=1
		fi
	done
	return "$ok"
}

node_arg() {
	[[ "${1:-}" == 1 || "${1:-}" == 2 ]] || die "node number ${1:+\"$1\" }must be 1 or 2"
}

cmd_stop_node() {
	node_arg "${1:-}"
	lock
	stop_node "$1"
	# The caller relies on the node being down (a test of a lost replica).
	! ping_node "$1" || die "node$1 still answers on port $(http_port "$1")"
}

cmd_start_node() {
	node_arg "${1:-}"
	lock
	ping_zk || die "ZooKeeper is not running (run: $0 ensure)"
	ensure_node "$1"
}

cmd_query() {
	node_arg "${1:-}"
	[[ $# -ge 2 ]] || die "usage: $0 query N SQL"
	local n="$1" sql="$2" code color=0
	command -v curl >/dev/null 2>&1 || die "curl is needed for 'query'"
	# Pretty* formats: colours only on a terminal (no escape codes in logs or CI output).
	[[ -t 1 ]] && color=1
	BODY_FILE="$(mktemp)"
	trap 'rm -f "$BODY_FILE"' EXIT
	code="$(curl -sS -o "$BODY_FILE" -w '%{http_code}' --data-binary "$sql" \
		"http://127.0.0.1:$(http_port "$n")/?output_format_pretty_color=${color}")" ||
		die "cannot reach node$n on port $(http_port "$n") (run: $0 ensure)"
	if [[ "$code" != 200 ]]; then
		cat "$BODY_FILE" >&2
		exit 1
	fi
	cat "$BODY_FILE"
}

case "${1:-}" in
ensure | stop | status | stop-node | start-node) adopt_running ;;
esac

case "${1:-}" in
ensure) cmd_ensure ;;
stop) cmd_stop ;;
status) cmd_status ;;
stop-node) shift; cmd_stop_node "$@" ;;
start-node) shift; cmd_start_node "$@" ;;
query) shift; cmd_query "$@" ;;
*)
	echo "usage: $0 ensure|stop|status|stop-node N|start-node N|query N SQL" >&2
	exit 2
	;;
esac
