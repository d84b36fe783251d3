# readsync: `make demo` runs the whole job locally; `make test` runs the tests on the
# current ClickHouse in about ten minutes; `make test-all` runs the whole matrix (CI).
SHELL   := /bin/bash
GO      ?= go
BIN     := bin
# The version: the VERSION file, a release (0.6.0) at the commit that makes
# it and the next release with -dev (0.7.0-dev) at every other
# (CONTRIBUTING.md, "Releases"). The binary embeds it; the chart's version
# and appVersion and the kustomize bases' image tag repeat it
# (TestVersionInOnePlace in deployments holds them to it).
VERSION := $(shell cat VERSION)
# The commit, as the binary prints it: 12 digits, and -modified when the
# work tree differs from it (as Go's vcs.modified: untracked files count).
# The image's build sees no .git, so make stamps it.
COMMIT  ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) || c=unknown; \
	if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then c=$$c-modified; fi; echo $$c)
# The build's name, which --version prints and the image is tagged with: the
# release alone for a release commit as committed, else the version and the
# commit (app.Build says the same from inside the binary).
TAG     := $(if $(findstring -,$(VERSION))$(findstring -modified,$(COMMIT)),$(VERSION)-$(COMMIT),$(VERSION))
LDFLAGS := -s -w -X main.commit=$(COMMIT)
# How much `make test` fuzzes each target: a count of inputs, not a duration.
# A duration races a deadline inside Go's fuzz coordinator, which on a loaded
# machine fails the target with "context deadline exceeded" having found
# nothing; a count has no deadline to race. `make fuzz FUZZTIME=5m` digs deeper.
FUZZTIME ?= 20000x
FUZZ_TARGETS := ./apiclient:FuzzDecodeList ./apiclient:FuzzDecodeProject ./sync:FuzzParsePercent ./sync:FuzzParseSourceTime
# The workload of `make bench`: the "readsync at scale" issue's, by default.
BENCH_NAMES        ?= 2000
BENCH_MESSAGES     ?= 20
BENCH_LATENCY      ?= 20ms
BENCH_CONCURRENCY  ?= 16
BENCH_BIG_MESSAGES ?= 300000
# The sizes of `make bench-names`: the "A million names" issue's.
BENCH_NAME_SIZES ?= 10000,100000,1000000

# The backlog of `make bench-catchup`: the "Repairs that always finish" issue's, by default.
BENCH_CATCHUP_PROJECTS ?= 400
BENCH_CATCHUP_MESSAGES ?= 50
BENCH_CATCHUP_ROWS     ?= 10000000
BENCH_CATCHUP_PASSES   ?= 6
# The names of `make bench-health` and its passes, a minute apart: the "Every
# name's health at a glance" issue's names, and a day of passes.
BENCH_HEALTH_NAMES  ?= 100000
BENCH_HEALTH_PASSES ?= 1440

# The depths of `make bench-history`: the "A pass costs what it changes" issue's.
BENCH_HISTORY          ?= 10,1000,10000,30000
BENCH_HISTORY_PROJECTS ?= 100
BENCH_HISTORY_MESSAGES ?= 10

# The tools the tests and `make lint` run (kustomize, helm, kube-score,
# staticcheck) are pinned in scripts/tools.sh, which `make tools` has install
# them into this directory; every recipe finds them there first.
TOOLS_BIN := $(shell scripts/tools.sh bin)
export PATH := $(TOOLS_BIN):$(PATH)
# go test's limit on one package's tests, for each run. In `make test-all` the
# race detector runs in the 18.16 run, over every package and test; the 26.7
# run checks what the current release changes, without it (the tests and the
# servers share two cores). The longest packages (internal/app, sink/derived)
# take three to four minutes on 26.7 without the detector and seven to
# eight on 18.16 with it and the cluster; the limits leave room for a loaded
# machine. A fuzz target takes seconds.
TEST_TIMEOUT_OLD     ?= 20m
TEST_TIMEOUT_CURRENT ?= 10m
TEST_TIMEOUT_FUZZ    ?= 5m

# The history of `make bench-bi`: the "Dashboards stay fast as history grows" issue's, by default.
BENCH_BI_PROJECTS ?= 500
BENCH_BI_MESSAGES ?= 200
BENCH_BI_DAYS     ?= 30
BENCH_BI_PASSES   ?= 24

.PHONY: all build test test-all checks stop tools fmt vet lint unit unit-current fuzz manifests demo run bench bench-bi bench-catchup bench-history bench-health bench-verify bench-repair bench-bytes bench-names bench-go clickhouse clickhouse-stop cluster cluster-stop clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/readsync ./cmd/readsync
	$(GO) build -o $(BIN)/fakeupstream ./cmd/fakeupstream

## test: formatting, vet, and every unit and integration test against the current ClickHouse (26.7),
## which it starts itself; then stops what it started. About ten minutes on a fresh machine.
# A server that ran before (`make clickhouse`, a run interrupted) is left
# running: it may be someone's.
test:
	@ran=""; scripts/clickhouse.sh status >/dev/null 2>&1 && ran="current"; \
	status=0; $(MAKE) --no-print-directory fmt vet unit-current || status=$$?; \
	[ -n "$$ran" ] || scripts/clickhouse.sh stop; \
	exit $$status

## test-all: the whole matrix, what CI runs: the pinned tools, formatting, vet, staticcheck, every test on
## ClickHouse 18.16 and its cluster with the race detector, the ClickHouse tests on 26.7 with the cluster
## DDL check, the manifest and alert tests with their tools required, fuzzing; then stops what it started.
test-all:
	@ran=""; \
	READSYNC_CLICKHOUSE_RELEASE=18.16 scripts/clickhouse.sh status >/dev/null 2>&1 && ran="$$ran old"; \
	scripts/clickhouse.sh status >/dev/null 2>&1 && ran="$$ran current"; \
	scripts/cluster.sh status >/dev/null 2>&1 && ran="$$ran cluster"; \
	status=0; $(MAKE) --no-print-directory checks || status=$$?; \
	case " $$ran " in *" old "*) ;; *) READSYNC_CLICKHOUSE_RELEASE=18.16 scripts/clickhouse.sh stop ;; esac; \
	case " $$ran " in *" current "*) ;; *) scripts/clickhouse.sh stop ;; esac; \
	case " $$ran " in *" cluster "*) ;; *) scripts/cluster.sh stop ;; esac; \
	exit $$status

checks: tools lint unit fuzz

## stop: stop every server the project's scripts started (both ClickHouse releases, the cluster).
stop:
	@READSYNC_CLICKHOUSE_RELEASE=18.16 scripts/clickhouse.sh stop
	@scripts/clickhouse.sh stop
	@scripts/cluster.sh stop

## tools: kustomize, helm, kube-score and staticcheck at their pinned versions (scripts/tools.sh),
## and Debian's prometheus package (promtool, prometheus) and chromium; installs only what is missing.
tools:
	@GO=$(GO) scripts/tools.sh ensure
	@scripts/prometheus.sh ensure
	@scripts/chromium.sh ensure

fmt:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

vet:
	$(GO) vet ./...

lint: tools fmt vet
	staticcheck ./...

# The integration tests run twice, once on each ClickHouse release readsync is
# tested on: Debian's 18.16 (the oldest) with its two-node cluster, then the
# current release (26.7), which scripts/clickhouse.sh starts by default. The
# second run takes only the packages whose tests use a ClickHouse (those that
# import sinktest, or apptest, whose fixture holds a database). What each
# server cannot do comes from the script that started it (`lacks`), asked
# before the test DSN is set, which it would take for a server of one's own.
# A current release cannot run as a cluster here, so there the cluster-mode
# DDL is executed on the one server (see the README).
# scripts/clickhouse.sh and scripts/cluster.sh start private servers (installing
# Debian's packages and the npm package of the current release when they may),
# or pass on READSYNC_TEST_CLICKHOUSE_DSN and READSYNC_TEST_CLUSTER_DSNS.
# The manifest tests render deployments/ with kustomize and helm and score
# the chart with kube-score; the alert tests run Debian's promtool and
# prometheus (package prometheus); the status page's browser test runs Debian's
# chromium. They take each from PATH, where `make tools` put it; the variables
# that require them (below) make a missing one a failure.
CH_PACKAGES = $$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | awk '/readsync\/(sink\/sinktest|internal\/apptest)/ {print $$1}')
unit: tools
	@old=$$(READSYNC_CLICKHOUSE_RELEASE=18.16 scripts/clickhouse.sh ensure) || { echo "make test: no ClickHouse 18.16; see the message above" >&2; exit 1; }; \
	cluster=$$(scripts/cluster.sh ensure) || { echo "make test: no ClickHouse cluster; see the message above" >&2; exit 1; }; \
	current=$$(scripts/clickhouse.sh ensure) || { echo "make test: no current ClickHouse; see the message above" >&2; exit 1; }; \
	old_lacks=$$(READSYNC_CLICKHOUSE_RELEASE=18.16 scripts/clickhouse.sh lacks); current_lacks=$$(scripts/clickhouse.sh lacks); \
	export READSYNC_REQUIRE_CLICKHOUSE=1 READSYNC_REQUIRE_TLS_SERVER=1 READSYNC_REQUIRE_KUSTOMIZE=1 READSYNC_REQUIRE_HELM=1 READSYNC_REQUIRE_PROMETHEUS=1 READSYNC_REQUIRE_KUBESCORE=1 READSYNC_REQUIRE_CHROMIUM=1; \
	if [ -z "$${READSYNC_TEST_CLICKHOUSE_DSN:-}" ]; then \
		export READSYNC_TEST_CLICKHOUSE_READER=readsync_reader READSYNC_REQUIRE_CLICKHOUSE_READER=1; \
	fi; \
	echo "== ClickHouse 18.16 ($$old) and its cluster ($$cluster): every test"; \
	READSYNC_TEST_CLICKHOUSE_DSN=$$old READSYNC_TEST_CLICKHOUSE_LACKS="$$old_lacks" \
	READSYNC_TEST_CLUSTER_DSNS=$$cluster READSYNC_REQUIRE_CLUSTER=1 \
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT_OLD) ./... || exit 1; \
	echo "== the current ClickHouse ($$current): the tests that use a ClickHouse"; \
	READSYNC_TEST_CLICKHOUSE_DSN=$$current READSYNC_TEST_CLICKHOUSE_LACKS="$$current_lacks" \
	READSYNC_REQUIRE_CLUSTER_DDL=1 \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT_CURRENT) $(CH_PACKAGES)

# make test's one run: every package against the current release, without
# the race detector and without requiring the tools (the tests of a tool not
# on PATH skip; make test-all requires them). Its cluster-mode DDL check
# needs ZooKeeper, which only make test-all starts.
unit-current:
	@current=$$(scripts/clickhouse.sh ensure) || { echo "make test: no current ClickHouse; see the message above" >&2; exit 1; }; \
	current_lacks=$$(scripts/clickhouse.sh lacks); \
	export READSYNC_REQUIRE_CLICKHOUSE=1; \
	if [ -z "$${READSYNC_TEST_CLICKHOUSE_DSN:-}" ]; then \
		export READSYNC_TEST_CLICKHOUSE_READER=readsync_reader READSYNC_REQUIRE_CLICKHOUSE_READER=1; \
	fi; \
	echo "== the current ClickHouse ($$current): every test"; \
	READSYNC_TEST_CLICKHOUSE_DSN=$$current READSYNC_TEST_CLICKHOUSE_LACKS="$$current_lacks" \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT_CURRENT) ./...

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		out=$$($(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -timeout $(TEST_TIMEOUT_FUZZ) 2>&1) || { echo "$$out"; exit 1; }; \
	done

## manifests: writes the files of deployments/ that repeat another of the repository (kustomize and helm
## read none outside their directories) from their sources: the alerts, the dashboard, the example schedules.
# Edit the sources, then run it; TestGeneratedFilesUpToDate (deployments) fails until then.
manifests:
	$(GO) run ./scripts/manifests

## demo: fake upstream + local ClickHouse + three backfills + a read-trend table + --verify.
demo: build
	@scripts/demo.sh

## run: the daemon against the fake upstream and a local ClickHouse, a pass a minute, until Ctrl-C.
run: build
	@scripts/demo.sh daemon

## bench: one backfill per workload against the fake upstream and local ClickHouse; prints one table.
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
bench: build
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/bench -dsn "$$dsn" -bin $(BIN) \
		-names $(BENCH_NAMES) -messages $(BENCH_MESSAGES) -latency $(BENCH_LATENCY) \
		-concurrency $(BENCH_CONCURRENCY) -big-messages $(BENCH_BIG_MESSAGES)

## bench-bi: generates snapshot history into a scratch database and times every view and dashboard query.
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
bench-bi:
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-bi: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/benchbi -dsn "$$dsn" -projects $(BENCH_BI_PROJECTS) -messages $(BENCH_BI_MESSAGES) \
		-days $(BENCH_BI_DAYS) -passes-per-day $(BENCH_BI_PASSES)

## bench-names: readsync's peak memory and time against the number of names, from an nft_names_file.
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
bench-names: build
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-names: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/bench -dsn "$$dsn" -bin $(BIN) -names 0 -big-messages 0 -concurrency 32 -name-sizes $(BENCH_NAME_SIZES)

## bench-catchup: a backlog of earlier snapshots inserted by hand, and the reconcile that drains it.
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
bench-catchup: build
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-catchup: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/benchcatchup -dsn "$$dsn" -bin $(BIN)/readsync -projects $(BENCH_CATCHUP_PROJECTS) \
		-messages $(BENCH_CATCHUP_MESSAGES) -rows $(BENCH_CATCHUP_ROWS) -passes $(BENCH_CATCHUP_PASSES)

## bench-history: what a pass, the catch-up of an import and --verify cost as the stored history deepens.
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
bench-history: build
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-history: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/benchcatchup -dsn "$$dsn" -bin $(BIN)/readsync -database readsync_bench_history -projects $(BENCH_HISTORY_PROJECTS) \
		-messages $(BENCH_HISTORY_MESSAGES) -history $(BENCH_HISTORY) -passes 5

## bench-health: the view name_health's queries at 100 000 names, 1% failing at every pass of a day.
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
bench-health:
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-health: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/benchhealth -dsn "$$dsn" -names $(BENCH_HEALTH_NAMES) -passes $(BENCH_HEALTH_PASSES)

## bench-verify: readsync --verify's wall time, peak RSS and rows read at a million names, whole and --since.
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
BENCH_VERIFY_NAMES ?= 1000000
bench-verify: build
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-verify: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/benchverify -dsn "$$dsn" -bin $(BIN)/readsync -names $(BENCH_VERIFY_NAMES)

## bench-repair: what --repair of one project takes and writes, on make bench-bi's history (kept between runs).
# Not part of `make test`: it measures, it asserts nothing. BENCHMARKS.md explains the table.
bench-repair: build
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-repair: no ClickHouse; see the message above" >&2; exit 1; }; \
	$(GO) run ./scripts/benchbi -dsn "$$dsn" -database readsync_bench_repair -keep -runs 1 -old-runs 0 >/dev/null && \
	$(GO) run ./scripts/benchrepair -dsn "$$dsn" -database readsync_bench_repair

## bench-bytes: the bytes a snapshot row takes on disk, by column, with readsync's schema (codecs included where the server has them).
bench-bytes:
	@dsn=$$(scripts/clickhouse.sh ensure) || { echo "make bench-bytes: no ClickHouse; see the message above" >&2; exit 1; }; \
	for shape in bursty steady uniform; do $(GO) run ./scripts/benchbytes -dsn "$$dsn" -shape $$shape || exit 1; echo; done

## bench-go: per-message Go benchmarks of list decoding and row building.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./apiclient ./sync

clickhouse:
	@scripts/clickhouse.sh ensure

clickhouse-stop:
	@scripts/clickhouse.sh stop

## cluster: ZooKeeper and a two-node ClickHouse cluster for the cluster tests.
cluster:
	@scripts/cluster.sh ensure

cluster-stop:
	@scripts/cluster.sh stop

## image: the container image, tagged readsync:$(TAG), as --version names the build; needs a Docker engine.
IMAGE ?= readsync:$(TAG)
.PHONY: image
image:
	docker build --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

clean:
	rm -rf $(BIN)
