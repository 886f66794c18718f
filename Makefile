# scimcp: build, run and test. `make test` is the whole suite (CI runs it).
GO      ?= go
BIN     := bin/scimcp
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build run test test-go test-fuzz test-e2e bench fuzz clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/scimcp

# The server on http://127.0.0.1:8765/mcp over the current folder.
run: build
	./$(BIN) serve --http 127.0.0.1:8765

# Everything: vet, Go unit and in-process tests (with the race detector), then
# the end-to-end suite that drives the built binary with the official
# TypeScript SDK client and the MCP conformance suite.
test: build test-go test-fuzz test-e2e

test-go:
	$(GO) vet ./...
	SCIMCP_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 ./...

# Each fuzz target for a few seconds on top of its seed corpus
# (FUZZTIME=5m make test-fuzz for a long run).
FUZZTIME ?= 10s
FUZZ_TARGETS := ./workspace:FuzzClean ./workspace:FuzzReadPage ./workspace:FuzzReadFileOutside \
	./workspace/outputs:FuzzPreview ./toolkit:FuzzArguments
test-fuzz:
	@bash .ci/fuzz.sh "$(FUZZTIME)" $(FUZZ_TARGETS)

test-e2e: build
	SCIMCP_BIN=$(CURDIR)/$(BIN) bash e2e/run.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
