#!/usr/bin/env bash
# Makes Chromium available to the test that loads the daemon's status page in
# a headless browser: Debian's chromium package, installed when missing and
# the script may (as scripts/prometheus.sh installs Prometheus). The test
# starts and stops its own browser.
#
# Usage: scripts/chromium.sh ensure
#
# Environment:
#   READSYNC_NO_INSTALL=1   never install packages with apt-get
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/server.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/server.sh"

missing() {
	cat >&2 <<-EOF
		chromium.sh: $1.
		Install it: sudo apt-get update && sudo apt-get install -y chromium
		(the status page's browser test needs chromium on PATH).
	EOF
	exit 1
}

case "${1:-}" in
ensure)
	if ! command -v chromium >/dev/null 2>&1; then
		install_packages chromium
	fi
	command -v chromium >/dev/null 2>&1 || missing "chromium still missing after apt-get install"
	;;
*)
	echo "usage: $0 ensure" >&2
	exit 2
	;;
esac
