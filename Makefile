# Chronicle — run `make help` for the targets.

GO          ?= go
GOBIN       ?= $(shell $(GO) env GOPATH)/bin
STATICCHECK ?= $(GOBIN)/staticcheck
# v0.8.2 is staticcheck 2026.2.2; the module proxy serves it by its module version
STATICCHECK_VERSION ?= v0.8.2
# rapid checks per property test in `make ci` (the default is 100)
RAPID_CHECKS ?= 1000
# checks of TestRapidWorkflowsMongo in `make ci`, which runs it once, in its
# ci-rapid-mongo job, not also under -race (`make test` runs 40): since
# programs also send signals, a check takes about 9.4 s on FerretDB on an
# idle 2-core machine (60 checks took 563 s), so 30 take under 5 minutes,
# beside the other jobs; raise it (RAPID_MONGO_CHECKS=200 make ci) for a
# longer search
RAPID_MONGO_CHECKS ?= 30
FUZZTIME    ?= 30s
# the fuzz targets of the checkpoint log's notes, proofs and witness
# requests run this long each in `make fuzz` (their inputs are small)
TLOG_FUZZTIME ?= 5s
TLOG_FUZZ   := FuzzCheckpointNote FuzzConsistencyProof FuzzInclusionProof FuzzWitnessRequest
# the PostgreSQL server bench-compare runs on (each run in a database of its own)
CHRONICLE_TEST_PG_URL ?= postgres://root@127.0.0.1:5432/test
# the coordinator of the local Citus cluster (scripts/citus.sh) when the
# extension is installed on this machine; the Citus tests skip without it
ifeq ($(origin CHRONICLE_TEST_CITUS_URL),undefined)
CHRONICLE_TEST_CITUS_URL := $(shell ./scripts/citus.sh installed && ./scripts/citus.sh url)
endif
export CHRONICLE_TEST_CITUS_URL
# flags for bench-compare, e.g. COMPARE_FLAGS='-runs 1 -workloads W1 -json compare.json'
COMPARE_FLAGS ?=

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-14s %s\n", $$1, $$2}'

.PHONY: demo
demo: ## run the demo on the embedded memory provider
	$(GO) run ./examples/loanapproval

.PHONY: services
services: ## start the servers the integration tests need
	@./scripts/services.sh

.PHONY: services-stop
services-stop: ## stop the servers that services started (FerretDB)
	@./scripts/services.sh stop

.PHONY: test
test: services ## run every test
	$(GO) test -timeout 20m ./...

.PHONY: test-race
test-race: services ## run every test with the race detector
	$(GO) test -race ./...

.PHONY: lint
lint: $(STATICCHECK) ## gofmt, go vet (with and without cgo: only the Oracle driver needs it) and staticcheck
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: screenshots
screenshots: ## regenerate the console's screenshots in docs/console/ (headless Chromium)
	cd console/browsertest && CHRONICLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestScreenshots$$' -v ./...

.PHONY: bench
bench: ## run the Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: bench-compare
bench-compare: ## compare Chronicle and DBOS Transact Go on CHRONICLE_TEST_PG_URL (W1, W2, W3; COMPARE_FLAGS)
	cd bench/compare && CHRONICLE_TEST_PG_URL='$(CHRONICLE_TEST_PG_URL)' $(GO) run . $(COMPARE_FLAGS)

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (those of TLOG_FUZZ for TLOG_FUZZTIME)
	@for target in $$($(GO) test -list '^Fuzz' ./fuzz/ | grep '^Fuzz'); do \
		t=$(FUZZTIME); \
		case " $(TLOG_FUZZ) " in *" $$target "*) t=$(TLOG_FUZZTIME);; esac; \
		echo "== $$target ($$t)"; \
		$(GO) test ./fuzz/ -run '^$$' -fuzz "^$$target$$" -fuzztime $$t || exit 1; \
	done

# The tests that need a database server (PostgreSQL, the MongoDB wire
# server) outside the fuzz package; CI runs them verbosely so its output
# shows that they ran against the server, or the loud message of those
# skipped without one (the MongoDB replica set, Oracle).
SERVER_TESTS := ^(TestConformance|TestMigrate|TestRoundFailsWhenItsConnectionIsKilled|TestCommitWhoseOutcomeIsUnknownIsSafeToRetry|TestRounds|TestWorkHints|TestPostgresCommands|TestPostgresEndToEnd|TestConcurrentWriters|TestUndecodableMessage|TestKillWorkersPostgres|TestConformancePeekLock|TestConformanceTransactional|TestMongo.*|TestOracle.*|TestPostgresUI|TestPostgresNoSequentialScans|TestCitus.*|TestKillWorkersCitus)$$
SERVER_PACKAGES := ./provider/postgres/ ./provider/mongo/ ./provider/oracle/ ./cmd/chronicle/ ./internal/killtest/ .

# The jobs that run tests verbosely print, of their output, the lines
# that say which tests ran and the loud skips (TEST_SUMMARY); the whole
# output is kept in .ci-logs/, and when the tests fail the job prints it
# but for the lines of the tests that passed: the failures' messages, a
# timed-out run's running tests and goroutines.
TEST_SUMMARY := ^(--- |ok|FAIL|panic)|!!!
# $(call summarize,log) is the end of a verbose go test pipeline: log is
# the name of the file in .ci-logs/ that keeps the whole output.
summarize = tee $(CURDIR)/.ci-logs/$(1) | grep -E '$(TEST_SUMMARY)' || { \
	echo "== the tests failed: their output but the lines of tests that passed (whole in .ci-logs/$(1)):"; \
	grep -v -E '^ *(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|SKIP))' $(CURDIR)/.ci-logs/$(1) | tail -n 800; exit 1; }

# `make ci` runs these jobs CI_JOBS at a time (make -j), longest first, each
# job's output printed whole when it ends (--output-sync), between the
# times it started and passed: CI's single threaded parts (the rapid
# machines, the MongoDB one waiting on FerretDB, the fuzz package under
# -race) leave a core idle when they run one after the other. A failed job
# fails `make ci` once the jobs already running have ended.
# docs/testing.md ("Chronicle's own CI") has what each job costs.
CI_JOBS ?= 3
CI_JOB_LIST := ci-rapid-mongo ci-race ci-server ci-rapid-postgres ci-rapid-memory ci-modules ci-lint

.PHONY: ci
ci: ## what CI runs: lint, every test with -race (the server ones listed), the nested modules, the full rapid runs
	@echo "ci: $(CI_JOB_LIST), $(CI_JOBS) at a time; each job's output shows when it ends"
	@$(MAKE) --no-print-directory -j$(CI_JOBS) --output-sync=target $(CI_JOB_LIST)

# ci-build compiles the packages every job links against, once, in both
# modes, before the jobs start, so that they do not compile them side by
# side. It starts the servers first.
.PHONY: ci-build
ci-build: services
	@date -u "+== $@ starts %H:%M:%S UTC"
	@mkdir -p .ci-logs
	$(GO) build ./... && $(GO) build -race ./...
	@date -u "+== $@ passed %H:%M:%S UTC"

# ci-lint is lint, after ci-build.
.PHONY: ci-lint
ci-lint: ci-build
	@date -u "+== $@ starts %H:%M:%S UTC"
	@$(MAKE) --no-print-directory lint
	@date -u "+== $@ passed %H:%M:%S UTC"

.PHONY: ci-race
ci-race: ci-build
	@date -u "+== $@ starts %H:%M:%S UTC"
	$(GO) test -race -count=1 -timeout 20m -skip '$(SERVER_TESTS)|^TestRapidWorkflowsMongo$$' ./...
	@date -u "+== $@ passed %H:%M:%S UTC"

.PHONY: ci-server
ci-server: ci-build
	@date -u "+== $@ starts %H:%M:%S UTC"
	$(GO) test -race -count=1 -timeout 30m -v -run '$(SERVER_TESTS)' $(SERVER_PACKAGES) 2>&1 | $(call summarize,ci-server.log)
	@date -u "+== $@ passed %H:%M:%S UTC"

.PHONY: ci-modules
ci-modules: ci-build $(STATICCHECK)
	@date -u "+== $@ starts %H:%M:%S UTC"
	cd otel && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test -race -count=1 ./...
	cd console/browsertest && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test -race -count=1 -v ./... 2>&1 | $(call summarize,browsertest.log)
	cd bench/compare && $(GO) vet ./... && $(STATICCHECK) ./... && $(GO) test -race -count=1 -v ./... 2>&1 | $(call summarize,compare.log)
	@date -u "+== $@ passed %H:%M:%S UTC"

# The full rapid runs (without -race), in three processes that run side
# by side: rapid.Check reads -rapid.checks, a package variable, so the
# machines of ./fuzz run one after the other within a process
# (capRapidChecks). The two on a server (PostgreSQL, FerretDB) wait on it
# more than they compute: the MongoDB one is CI's longest job, so it
# starts first, bounded by 40 minutes (it took 18 on a 2-core machine
# shared with other builds, a load average of 14). Together they run
# every test of ./fuzz whose name has Rapid in it: ci-rapid-check fails if
# one is added that none of them runs.
CI_RAPID_MONGO    := ^TestRapidWorkflowsMongo$$
CI_RAPID_POSTGRES := ^TestRapidWorkflowsPostgres$$
CI_RAPID_MEMORY   := ^(TestRapidRounds.*|TestRapidCheckpointAdversary|TestRapidWorkflows(Transactional|PeekLock|Oracle))$$

.PHONY: ci-rapid-mongo
ci-rapid-mongo: ci-build
	@date -u "+== $@ starts %H:%M:%S UTC"
	CHRONICLE_RAPID_MONGO_CHECKS=$(RAPID_MONGO_CHECKS) $(GO) test -count=1 -timeout 40m -run '$(CI_RAPID_MONGO)' ./fuzz/ -rapid.checks=$(RAPID_CHECKS) -v
	@date -u "+== $@ passed %H:%M:%S UTC"

.PHONY: ci-rapid-postgres
ci-rapid-postgres: ci-build ci-rapid-check
	@date -u "+== $@ starts %H:%M:%S UTC"
	$(GO) test -count=1 -timeout 25m -run '$(CI_RAPID_POSTGRES)' ./fuzz/ -rapid.checks=$(RAPID_CHECKS) -v
	@date -u "+== $@ passed %H:%M:%S UTC"

.PHONY: ci-rapid-memory
ci-rapid-memory: ci-build ci-rapid-check
	@date -u "+== $@ starts %H:%M:%S UTC"
	$(GO) test -count=1 -timeout 25m -run '$(CI_RAPID_MEMORY)' ./fuzz/ -rapid.checks=$(RAPID_CHECKS) -v
	@date -u "+== $@ passed %H:%M:%S UTC"

# ci-rapid-check fails when a test of ./fuzz named Rapid is in none of the
# CI_RAPID_ groups, or in more than one.
.PHONY: ci-rapid-check
ci-rapid-check: ci-build
	@$(GO) test -list 'Rapid' ./fuzz/ | grep '^Test' | while read -r name; do \
		n=0; \
		for re in '$(CI_RAPID_MONGO)' '$(CI_RAPID_POSTGRES)' '$(CI_RAPID_MEMORY)'; do \
			if grep -qE "$$re" <<<"$$name"; then n=$$((n + 1)); fi; \
		done; \
		if [ "$$n" -ne 1 ]; then echo "ci: $$name is in $$n of the CI_RAPID_ groups of the Makefile, not 1"; exit 1; fi; \
	done
