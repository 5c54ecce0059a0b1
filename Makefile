# Run `make help` to see the targets.

## help: print this help
.PHONY: help
help:
	@echo 'Usage: make <target>'
	@sed -n 's/^## //p' $(MAKEFILE_LIST) | awk '{ i = index($$0, ": "); printf "  %-6s %s\n", substr($$0, 1, i - 1), substr($$0, i + 2) }'

## run: run the service on :8080 (pass flags with ARGS="-addr :9090")
.PHONY: run
run:
	go run . $(ARGS)

## build: build the static binary bin/membership
.PHONY: build
build:
	CGO_ENABLED=0 go build -trimpath -o bin/membership .

## test: run every test with the race detector
.PHONY: test
test:
	go test -race ./...

## lint: check formatting, vet, and that go.mod and go.sum are tidy and verified
.PHONY: lint
lint:
	@test -z "$$(gofmt -l .)" || { echo 'gofmt would change:'; gofmt -l .; exit 1; }
	go vet ./...
	go mod tidy -diff
	go mod verify

## fuzz: fuzz the users parser against encoding/json for FUZZTIME (default 60s)
.PHONY: fuzz
fuzz:
	go test -run '^$$' -fuzz FuzzParseUsers -fuzztime $(or $(FUZZTIME),60s) -fuzzminimizetime 200x ./membership
