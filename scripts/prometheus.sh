#!/usr/bin/env bash
# Makes Prometheus and promtool available to the tests that run them (the alert
# rules' unit tests, the end-to-end test of the alerts): Debian's prometheus
# package, installed when missing and the script may (as the ClickHouse scripts
# install their servers). The tests start and stop their own Prometheus; the
# package starts none here (no init system runs one).
#
# Usage: scripts/prometheus.sh ensure
#
# Environment:
#   READSYNC_NO_INSTALL=1   never install packages with apt-get
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/server.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/server.sh"

missing() {
	cat >&2 <<-EOF
		prometheus.sh: $1.
		Install it: sudo apt-get update && sudo apt-get install -y prometheus
		(the tests need its prometheus and promtool on PATH).
	EOF
	exit 1
}

case "${1:-}" in
ensure)
	if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
		install_packages prometheus
	fi
	command -v promtool >/dev/null 2>&1 || missing "promtool still missing after apt-get install"
	;;
*)
	echo "usage: $0 ensure" >&2
	exit 2
	;;
esac
