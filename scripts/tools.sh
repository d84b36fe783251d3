#!/usr/bin/env bash
# The Go tools that `make test` runs, at pinned versions, in the checkout's
# .tmp/bin: kustomize, helm and kube-score for the manifest tests, staticcheck
# for `make lint`. The Makefile puts that directory first on PATH, so the tests
# run these builds whatever else is installed. Built with `go install` (which
# needs the Go module proxy the first time), before any test runs: a build
# inside a test would spend the test's own time limit.
#
# Usage: scripts/tools.sh ensure|bin
#
#   ensure   install each tool that is missing from .tmp/bin or at another version
#   bin      print the directory the tools are in (for PATH)
#
# Environment:
#   GO       the go command (default: go)
#
# All chatter goes to stderr.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/server.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/server.sh"

BIN_DIR="$REPO/.tmp/bin"
GO="${GO:-go}"

# name, package, version. Later versions of kustomize and helm need a newer
# Go than go.mod's.
TOOLS=(
	"kustomize sigs.k8s.io/kustomize/kustomize/v5 v5.7.1"
	"helm helm.sh/helm/v3/cmd/helm v3.16.4"
	"kube-score github.com/zegl/kube-score/cmd/kube-score v1.20.0"
	"staticcheck honnef.co/go/tools/cmd/staticcheck v0.8.2"
)

# installed NAME PACKAGE VERSION: succeed when BIN_DIR/NAME was built from
# PACKAGE at VERSION, as the build information go embeds says.
installed() {
	local file="$BIN_DIR/$1" info
	[[ -x "$file" ]] || return 1
	info="$("$GO" version -m "$file" 2>/dev/null)" || return 1
	awk -v pkg="$2" -v version="$3" '
		$1 == "path" && $2 == pkg { p = 1 }
		$1 == "mod" && $3 == version { m = 1 }
		END { exit !(p && m) }' <<<"$info"
}

cmd_ensure() {
	local t name pkg version
	mkdir -p "$BIN_DIR"
	for t in "${TOOLS[@]}"; do
		read -r name pkg version <<<"$t"
		installed "$name" "$pkg" "$version" && continue
		log "installing $name $version into $BIN_DIR"
		GOBIN="$BIN_DIR" "$GO" install "$pkg@$version" ||
			die "go install $pkg@$version failed (it needs the Go module proxy, or the module in the cache)"
		installed "$name" "$pkg" "$version" || die "$BIN_DIR/$name is not $pkg $version after go install"
	done
}

case "${1:-}" in
ensure) cmd_ensure ;;
bin) echo "$BIN_DIR" ;;
*)
	echo "usage: $0 ensure|bin" >&2
	exit 2
	;;
esac
