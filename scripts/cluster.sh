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

# shellcheck source-path=SCRIPTDIR source=lib/server.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/server.sh"

STATE_DIR="${READSYNC_CLUSTER_DIR:-$REPO/.tmp/cluster}"
ZK_DIR="$STATE_DIR/zookeeper"
START_TIMEOUT=90
NODES=(1 2)
ZK_CLASSPATH="/usr/share/java/*:/etc/zookeeper/conf"

tcp_port() { echo "1910$1"; }
http_port() { echo "1911$1"; }
interserver_port() { echo "1912$1"; }
node_dir() { echo "$STATE_DIR/node$1"; }
node_dsn() { echo "clickhouse://default:@127.0.0.1:$(tcp_port "$1")/default"; }

dsns() {
	local n out=""
	for n in "${NODES[@]}"; do out="${out:+$out,}$(node_dsn "$n")"; done
	echo "$out"
}

ping_node() { ping_clickhouse "$(http_port "$1")"; }

# ping_zk: ZooKeeper answers the four-letter word "ruok" with "imok".
# zk_word sends ZooKeeper one of its four-letter commands and prints the reply.
zk_word() {
	# shellcheck disable=SC2016 # $1 and $2 expand in the inner bash
	timeout 2 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "%s" "$2" >&3
		cat <&3' _ "$ZK_PORT" "$1" 2>/dev/null || true
}

# ping_zk: ZooKeeper serves sessions. It answers ruok as soon as it runs,
# but refuses sessions while it loads its data (a long log after many test
# runs), and a node that starts then exits; srvr says "Mode:" only once it
# serves. A ZooKeeper started by an earlier version of this script allows
# ruok alone, and is taken as serving when it says so.
ping_zk() {
	local reply
	[[ "$(zk_word ruok)" == imok ]] || return 1
	reply="$(zk_word srvr)"
	[[ "$reply" == *"Mode:"* || "$reply" == *"not in the whitelist"* ]]
}

# running_state_dir: the state dir of the cluster whose ZooKeeper, started by this
# script, serves ZK_PORT.
running_state_dir() {
	local f cfg
	while read -r f; do
		cfg="$(tr '\0' '\n' <"$f" 2>/dev/null | tail -n 1)"
		[[ "$cfg" == */zookeeper/zoo.cfg && -f "$cfg" ]] || continue
		grep -qx "clientPort=$ZK_PORT" "$cfg" || continue
		dirname "$(dirname "$cfg")"
		return 0
	done < <(grep -lsa QuorumPeerMain /proc/[0-9]*/cmdline 2>/dev/null || true)
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
}

zk_pid() { running_pid "$ZK_DIR/zookeeper.pid" QuorumPeerMain; }

have_zookeeper() { [[ -f /usr/share/java/zookeeper.jar ]] && command -v java >/dev/null 2>&1; }

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
	install_packages "${pkgs[@]}"
	{ [[ -n "$(find_server)" ]] && have_zookeeper; } || missing "${pkgs[*]} still missing after apt-get install"
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
		4lw.commands.whitelist=ruok,srvr
		forceSync=no
		preAllocSize=4096
		autopurge.snapRetainCount=3
		autopurge.purgeInterval=1
	EOF
}

write_node_config() {
	local n="$1"
	write_server_config "$(node_dir "$n")" "$(tcp_port "$n")" "$(http_port "$n")" 67108864 <<-EOF
		    <interserver_http_port>$(interserver_port "$n")</interserver_http_port>
		    <interserver_http_host>127.0.0.1</interserver_http_host>
		    <uncompressed_cache_size>67108864</uncompressed_cache_size>
		$(zookeeper_xml)
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
	EOF
	# distributed_ddl_task_timeout (180s by default) bounds how long an ON CLUSTER
	# statement waits for a stopped node: 60s lets such a test fail in reasonable time.
	# poll_interval (10s by default) is how often an idle connection checks for
	# shutdown: stop-node with a test's connection open would wait that long.
	write_users_config "$(node_dir "$n")" <<-EOF
		            <distributed_ddl_task_timeout>60</distributed_ddl_task_timeout>
		            <poll_interval>1</poll_interval>
	EOF
}

start_zk() {
	write_zk_config
	log "starting ZooKeeper (state in $ZK_DIR, port $ZK_PORT)"
	# A small heap and the serial collector: the machine runs other servers too.
	start_daemon ZooKeeper "$ZK_DIR/zookeeper.pid" ping_zk -- \
		java -Xms32m -Xmx256m -XX:+UseSerialGC \
		-Dzookeeper.log.dir="$ZK_DIR" -cp "$ZK_CLASSPATH" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZK_DIR/zoo.cfg"
}

ensure_zk() {
	local pid
	if ping_zk; then
		return
	elif pid="$(zk_pid)"; then
		log "ZooKeeper (pid $pid) is running but not answering yet; waiting"
		wait_for ZooKeeper "$ZK_DIR/zookeeper.pid" ping_zk || exit 1
	else
		start_zk
	fi
}

ensure_node() { ensure_clickhouse "node$1" "$(node_dir "$1")" "$(http_port "$1")" write_node_config "$1"; }

# lock_cluster: serialise commands that start or stop processes.
lock_cluster() { lock "$STATE_DIR/.lock"; }

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
	lock_cluster
	install_missing
	ensure_zk
	local n
	for n in "${NODES[@]}"; do ensure_node "$n"; done
	dsns
}

stop_node() { stop_clickhouse "node$1" "$(node_dir "$1")" "$(http_port "$1")"; }

cmd_stop() {
	local n pid
	lock_cluster
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
	lock_cluster
	stop_node "$1"
	# The caller relies on the node being down (a test of a lost replica).
	! ping_node "$1" || die "node$1 still answers on port $(http_port "$1")"
}

cmd_start_node() {
	node_arg "${1:-}"
	lock_cluster
	ping_zk || die "ZooKeeper is not running (run: $0 ensure)"
	ensure_node "$1"
}

cmd_query() {
	node_arg "${1:-}"
	[[ $# -ge 2 ]] || die "usage: $0 query N SQL"
	http_query "node$1" "$(http_port "$1")" "$2"
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
