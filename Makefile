# Run `make help` to see the targets.

# What the binaries say they are (-version, the start log, /metrics): git
# describe's version and the commit, stamped at link time. Override them on
# the command line (make build VERSION=v1.2.0); outside a git checkout they
# are empty, and the binaries fall back to Go's build information.
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS = -X example.com/groupmembership/internal/buildinfo.version=$(VERSION) -X example.com/groupmembership/internal/buildinfo.revision=$(REVISION)
# BIN is where make build and build-postgres put the binaries.
BIN := bin
# Recipes run in bash with pipefail, so that go test -json | testprogress
# fails when go test does, even when it fails before a package starts.
SHELL := bash
.SHELLFLAGS := -o pipefail -c

## help: print this help
.PHONY: help
help:
	@echo 'Usage: make <target>'
	@sed -n 's/^## //p' $(MAKEFILE_LIST) | awk '{ i = index($$0, ": "); printf "  %-14s %s\n", substr($$0, 1, i - 1), substr($$0, i + 2) }'

## run: build bin/membership and run it on :8080 (pass flags with ARGS="-addr 127.0.0.1:9090")
.PHONY: run
run: build
	exec $(BIN)/membership $(ARGS)

## build: build the static binary bin/membership, stamped with VERSION and REVISION (BIN=dir puts it elsewhere)
.PHONY: build
build:
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/membership .

## build-postgres: build the static binary bin/membership-postgres, stamped as make build stamps bin/membership
.PHONY: build-postgres
build-postgres:
	cd postgres && CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(abspath $(BIN))/membership-postgres ./cmd/membership-postgres

## docker: build the images membership and membership-postgres, passing VERSION and REVISION as build arguments (the build context has no .git)
.PHONY: docker
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t membership .
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -f postgres/Dockerfile -t membership-postgres .

## test: run every test, the PostgreSQL store's included (installing Debian's postgresql if needed), with the race detector where cgo works (it needs a C compiler), then make clients and make alerts; prints each package as it starts and ends, what is running after 20 seconds without a line, and a summary of each part
.PHONY: test
test: postgres-tools
	@go build -o bin/testprogress ./internal/tools/testprogress || exit 1; \
	echo "make test: the service's tests (the durability tests start the program and kill it mid-write many times)"; \
	if [ "$$(go env CGO_ENABLED)" = 1 ]; then race=-race; else \
		if [ -n "$$CGO_ENABLED" ]; then why="CGO_ENABLED=$$CGO_ENABLED"; else why="no C compiler found: install gcc for the race detector"; fi; \
		echo "make test: cgo is off ($$why), so the tests run without -race"; race=; \
	fi; \
	echo "go test$${race:+ $$race} -timeout 30m -json ./... | bin/testprogress"; go test $$race -timeout 30m -json ./... | bin/testprogress || exit 1; \
	echo "make test: the PostgreSQL store's tests (a throwaway PostgreSQL server, and two instances with one killed mid-load)"; \
	echo "cd postgres && go test$${race:+ $$race} -timeout 30m -json ./... | ../bin/testprogress"; cd postgres && go test $$race -timeout 30m -json ./... | ../bin/testprogress
	@echo "make test: the clients generated from the OpenAPI document (make clients; the first time, it fetches the generators)"
	@$(MAKE) --no-print-directory clients 2>&1 | bin/testprogress -text
	@$(MAKE) --no-print-directory alerts 2>&1 | bin/testprogress -text

## check: the inner loop (under a minute): build the service, vet the three modules, then run the tests of the service's packages changed since BASE (default main: commits, staged, unstaged and untracked files) with -short and without -race
.PHONY: check
check:
	@base=$(or $(BASE),main); \
	go build -o bin/testprogress ./internal/tools/testprogress && \
	pkgs=$$(go run ./internal/tools/changedpkgs -base "$$base") && \
	pgpkgs=$$(go run ./internal/tools/changedpkgs -base "$$base" -module postgres) || exit 1; \
	echo "go build ./... && go vet ./..."; go build ./... && go vet ./... || exit 1; \
	echo "cd postgres && go vet ./..."; (cd postgres && go vet ./...) || exit 1; \
	echo "cd bench && go vet ./..."; (cd bench && go vet ./...) || exit 1; \
	if [ -n "$$pgpkgs" ]; then \
		echo "make check: postgres/ changed ($$(echo $$pgpkgs)): go vet compiled its tests; they need a PostgreSQL server and minutes, so make test runs them"; \
	fi; \
	if [ -z "$$pkgs" ]; then echo "make check: no package of the service changed since $$base"; exit 0; fi; \
	echo "go test -short -json $$(echo $$pkgs) | bin/testprogress"; go test -short -json $$pkgs | bin/testprogress

# postgres-tools: the PostgreSQL store's tests start a throwaway server from
# the machine's initdb and pg_ctl, unless MEMBERSHIP_TEST_POSTGRES names one.
.PHONY: postgres-tools
postgres-tools:
	@if [ -z "$$MEMBERSHIP_TEST_POSTGRES" ] && ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "test: installing Debian's postgresql with apt-get, for the PostgreSQL store's tests (or set MEMBERSHIP_TEST_POSTGRES to a server's URL)"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq postgresql; \
	fi

## alerts: check and test docs/alerts.yml with promtool (installs Debian's prometheus if needed)
.PHONY: alerts
alerts: prometheus-tools
	promtool check rules docs/alerts.yml
	promtool test rules docs/alerts_test.yml
	MEMBERSHIP_TEST_PROMTOOL=1 go test -run '^TestAlert' .

# prometheus-tools: make alerts runs promtool, which Debian ships in its
# prometheus package. Where systemd runs, installing the package starts a
# Prometheus server on :9090; only promtool is wanted, so it is stopped and
# disabled.
.PHONY: prometheus-tools
prometheus-tools:
	@if ! command -v promtool >/dev/null; then \
		echo "alerts: installing Debian's prometheus with apt-get, for promtool"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends prometheus || exit 1; \
		if [ -d /run/systemd/system ]; then $$sudo systemctl disable --now prometheus.service; fi; \
	fi

## image: build the images membership and membership-postgres with docker where a Docker engine answers, else with buildah (installing Debian's buildah if needed), saying which
.PHONY: image
image:
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
		echo "image: building with docker"; $(MAKE) --no-print-directory docker; \
	else \
		if ! command -v buildah >/dev/null; then \
			echo "image: installing Debian's buildah with apt-get"; \
			sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
			$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah runc || exit 1; \
		fi; \
		echo "image: no Docker engine answers: building with buildah (--format docker, which keeps the HEALTHCHECK)"; \
		buildah build --format docker --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t membership . && \
		buildah build --format docker --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -f postgres/Dockerfile -t membership-postgres .; \
	fi

## image-check: build the images of Dockerfile and postgres/Dockerfile with buildah and run them with podman (in memory, on a volume, with an admin listener, over TLS), and compose.yaml with podman-compose, on stand-ins for their base images made from this machine's files (about 2.5 minutes, 5 on a busy machine; needs root; installs Debian's podman, buildah, runc, netavark, iptables, podman-compose and openssl if needed)
.PHONY: image-check
image-check: image-tools postgres-tools
	.ci/image/check.sh

# image-tools: make image-check runs rootful podman and buildah (with runc, and
# netavark, which needs iptables but does not depend on it) and podman-compose,
# and makes its stand-ins for the base images from busybox-static,
# ca-certificates, tzdata and postgresql (postgres-tools); openssl makes the
# certificate of its TLS run.
.PHONY: image-tools
image-tools:
	@missing=""; for pkg in podman buildah runc netavark aardvark-dns iptables podman-compose busybox-static ca-certificates tzdata openssl; do \
		dpkg-query -W -f '$${Status}' $$pkg 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
		echo "image-check: installing Debian's$$missing with apt-get"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

## clients: generate a Go client (oapi-codegen) and TypeScript types (openapi-typescript) from httpapi/openapi.json in bin/clients, compile them, and fail on any untyped value (about 25 seconds, 2.5 minutes the first time; installs Debian's nodejs and npm if needed)
.PHONY: clients
clients: node-tools
	clientgen/clients.sh

# node-tools: make clients runs openapi-typescript and tsc with node and npm.
.PHONY: node-tools
node-tools:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		echo "clients: installing Debian's nodejs and npm with apt-get, for openapi-typescript and tsc"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq nodejs npm; \
	fi

## scim-conformance: run third-party SCIM packages against a fresh bin/membership on 127.0.0.1: scimmy's schemas on every reply of an Okta and Entra sequence, scim-patch on a corpus of PATCHes, three filter parsers on a corpus of filters; fails on a disagreement conformance/scim/known.mjs does not list (under 10 seconds; npm ci of the versions conformance/scim pins, and a Go module from the proxy; installs Debian's nodejs and npm if needed)
.PHONY: scim-conformance
scim-conformance: build node-tools
	cd conformance/scim/goparser && go build -o $(abspath $(BIN))/scim-filter-parser .
	cd conformance/scim && npm ci --no-audit --no-fund --loglevel=error
	cd conformance/scim && timeout 180 node run.mjs $(abspath $(BIN))/membership $(abspath $(BIN))/scim-filter-parser

## lint: check formatting, vet, that go.mod and go.sum are tidy and verified, that the service builds for every platform, and make deadcode
.PHONY: lint
lint: cross deadcode
	@test -z "$$(gofmt -l .)" || { echo 'gofmt would change:'; gofmt -l .; exit 1; }
	go vet ./...
	go mod tidy -diff
	go mod verify
	cd postgres && go vet ./... && go mod tidy -diff && go mod verify
	cd bench && go vet ./... && go mod tidy -diff && go mod verify

## deadcode: fail if a function of the three modules is reached by none of their commands, outside the packages for tests and for the programs that use the service (installs deadcode)
.PHONY: deadcode
deadcode: deadcode-tools
	@work=$$(mktemp -d) && trap 'rm -rf "$$work"' EXIT && \
	(cd "$$work" && go work init $(CURDIR) $(CURDIR)/postgres $(CURDIR)/bench) || exit 1; \
	echo "deadcode ./... ./postgres/... ./bench/..."; \
	out=$$(GOWORK="$$work/go.work" $(BIN)/deadcode -filter '^example\.com/groupmembership' ./... ./postgres/... ./bench/...) || { echo "$$out"; exit 1; }; \
	dead=$$(echo "$$out" | grep -vE '$(DEADCODE_ALLOWED)'); \
	if [ -n "$$dead" ]; then echo "make deadcode: no command reaches these functions: delete them, or move what only tests use into a _test.go file"; echo "$$dead"; exit 1; fi

# DEADCODE_ALLOWED are the files no command needs: the client and
# membershiptest (for programs that use the service), the embedded service
# that membershiptest serves (it needs the server's internals), and the
# packages only tests import (and internal/tlstest, which the benchmarks
# import too).
DEADCODE_ALLOWED = ^(client/|membershiptest/|internal/server/embedded\.go:|internal/store/storetest/|httpapi/scim/scimtest/|internal/metrics/metricstest/|internal/logtest/|internal/tlstest/|postgres/internal/pgtest/)

# deadcode-tools: make deadcode runs deadcode from $(BIN), installed there
# with go install at DEADCODE_VERSION when it is missing or another version.
DEADCODE_VERSION = v0.52.0
.PHONY: deadcode-tools
deadcode-tools:
	@if ! go version -m $(BIN)/deadcode 2>/dev/null | grep -qE '^\s+mod\s+golang\.org/x/tools\s+$(DEADCODE_VERSION)\s'; then \
		echo "deadcode: installing golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION) into $(BIN)"; \
		GOBIN=$(abspath $(BIN)) go install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION); \
	fi

## cross: build the service for linux, darwin, freebsd and windows, on amd64 and arm64, and vet its tests for darwin, freebsd and windows (make lint runs it)
.PHONY: cross
cross:
	@for os in linux darwin freebsd windows; do for arch in amd64 arm64; do \
		echo "GOOS=$$os GOARCH=$$arch go build ."; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 go build -o /dev/null . || exit 1; \
	done; done
	@for os in darwin freebsd windows; do echo "GOOS=$$os go vet ./..."; GOOS=$$os go vet ./... || exit 1; done

## fuzz: fuzz the parsers and the encoder against the standard library, FUZZTIME each (default 60s)
.PHONY: fuzz
fuzz:
	go test -run '^$$' -fuzz FuzzParseUsers -fuzztime $(or $(FUZZTIME),60s) -fuzzminimizetime 200x ./httpapi
	go test -run '^$$' -fuzz FuzzEncodeMembers -fuzztime $(or $(FUZZTIME),60s) -fuzzminimizetime 200x ./httpapi
	go test -run '^$$' -fuzz FuzzParseChangeForm -fuzztime $(or $(FUZZTIME),60s) -fuzzminimizetime 200x ./httpapi

## bench: Go benchmarks, the load and memory comparison with Redis and a bare handler, the nesting rows and memory, small groups' memory, then the PostgreSQL store against the embedded service and pgbench (about 15 minutes)
.PHONY: bench
bench: bench-tools postgres-tools
	go test -run '^$$' -bench . -benchmem ./...
	cd bench && go build -o ../bin/bench .
	bin/bench $(BENCHARGS)
	cd bench && go build -o ../bin/bench-postgres ./postgres
	bin/bench-postgres $(PGBENCHARGS)

## bench-postgres: the PostgreSQL store alone: POST 3, GET 10 and GET 1000 on one and two instances, against the embedded service and pgbench (about 4 minutes)
.PHONY: bench-postgres
bench-postgres: bench-tools postgres-tools
	cd bench && go build -o ../bin/bench-postgres ./postgres
	bin/bench-postgres $(PGBENCHARGS)

## bench-overhead: what metrics and revisions cost POST and GET, side by side with a build from before them (about 3 minutes)
# BEFORE is the last commit before metrics and revisions.
BEFORE = bce58d7ab8b471b164e5d9bb8269e2e81a6fb9c8
.PHONY: bench-overhead
bench-overhead: bench-tools
	rm -rf .bench-before && mkdir .bench-before
	git archive $(BEFORE) | tar -x -C .bench-before
	cd .bench-before && go build -o service-before .
	cd bench && go build -o ../bin/bench .
	bin/bench -baseline .bench-before/service-before $(BENCHARGS)
	rm -rf .bench-before

## bench-groups: GET /groups among a million groups, PUT of 1,000 users half changed, DELETE of a group of a million members (time and RSS growth), each against a service of 1,000 groups (about 1 minute)
.PHONY: bench-groups
bench-groups: bench-tools
	cd bench && go build -o ../bin/bench-groups ./groups
	bin/bench-groups $(BENCHARGS)

## bench-expiry: a million memberships due in the same second under a load of reads and writes: the expiry lag (p99) from /metrics and as probes saw it, and probe and load p99 before and during the expiry (about 1 minute)
.PHONY: bench-expiry
bench-expiry:
	cd bench && go build -o ../bin/bench-expiry ./expiry
	bin/bench-expiry $(BENCHARGS)

## bench-scale: 100,000,000 memberships (a million groups, power-law sizes up to 100,000; 10,000,000 users) loaded with bulk adds into the service with -data-dir and the feed off: RSS per membership, load time, snapshot size, restart time, and four requests against a service of 1,000 memberships (about 15 minutes; needs 7.0 GiB of memory and 3.3 GiB of disk, and refuses to start without them)
.PHONY: bench-scale
bench-scale: bench-tools
	cd bench && go build -o ../bin/bench-scale ./scale
	bin/bench-scale $(BENCHARGS)

## attack: thirteen attacks (hostile clients, idle and stalled connections, stalled TLS handshakes, long polls, a stalled stdout, a stuck or full disk, a cut log) on the built binaries on loopback, with their bounds (about 3.5 minutes; root for the disk attacks, PostgreSQL's initdb for one)
.PHONY: attack
attack:
	cd bench && go build -o ../bin/attack ./attack
	bin/attack $(ATTACKARGS)

# bench-tools installs wrk and redis-server (with redis-benchmark) when missing.
.PHONY: bench-tools
bench-tools:
	@missing=""; for tool in wrk redis-server redis-benchmark; do \
		command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then \
		echo "bench: installing wrk and redis-server with apt-get (missing:$$missing)"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && $$sudo apt-get install -y -qq wrk redis-server; \
	fi
