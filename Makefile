# The one command that runs every check: make test
SHELL := /bin/bash

.PHONY: test vet fmt lint unit python build release wheels proto bench-river up down

test: fmt vet lint unit python

build:
	go build -o bin/scimesh ./cmd/scimesh
	go build -o bin/scimesh-bench ./cmd/scimesh-bench

# The release archives and SHA256SUMS under dist/, for the four platforms
# or for PLATFORMS (make release PLATFORMS=linux/amd64); see tools/release.sh.
release:
	tools/release.sh

# The Python wheels that carry the binary, under python/dist/, one per
# archive that make release built; see tools/wheels.py.
wheels: release
	$(PYTHON) tools/wheels.py

# The containers of compose.yaml: PostgreSQL, SeaweedFS, two coordinators
# and two workers, the scimesh image built from the Dockerfile first.
# down keeps the volumes (the database and the bucket), so the next up
# finds the jobs and uploads again; docker compose down -v drops them.
up:
	docker compose up -d --build

down:
	docker compose down

# River beside SciMesh on one throwaway PostgreSQL cluster (docs/PERFORMANCE.md).
# The River harness, bench/river, is a module of its own: this module never
# depends on River, and go build/vet/test ./... here do not enter it.
bench-river:
	bench/river.sh

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# bench/river is a module of its own (River stays out of this one's
# dependencies); vetting it here keeps it building.
vet:
	go vet ./...
	cd bench/river && go vet ./...

lint:
	go tool staticcheck ./...

# The River harness's own tests run first (its module is not under ./...).
# The suite's output is long; when it fails, the failing tests and their
# messages are repeated at the end, where a truncated log still shows them.
unit:
	cd bench/river && go test -count=1 ./...
	@echo "go test -race -count=1 -timeout 30m ./..."
	@log=$$(mktemp); go test -race -count=1 -timeout 30m ./... 2>&1 | tee $$log; status=$${PIPESTATUS[0]}; \
	if [ $$status -ne 0 ]; then \
		echo; echo "== failures (go test exited $$status) =="; \
		grep -E -- '^\s*--- FAIL|^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: |^(FAIL|panic:)' $$log | grep -v ' output:$$' | tail -n 60; \
	fi; rm -f $$log; exit $$status

# The Python package's tests (python/tests), on Debian's /usr/bin/python3
# with python3-pytest, python3-pandas and python3-tqdm (and python3-venv,
# python3-setuptools and python3-wheel for the release's tests); they
# build the binary and run a real coordinator and workers. Without pytest
# they are skipped, loudly; under CI that is a failure (as is, in the
# suite, a missing pandas or tqdm).
PYTHON ?= /usr/bin/python3
python:
	@if $(PYTHON) -c 'import pytest' >/dev/null 2>&1; then \
		echo "cd python && $(PYTHON) -m pytest -q -p no:cacheprovider tests"; \
		cd python && PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -q -p no:cacheprovider tests; \
	elif [ -n "$$CI" ]; then \
		echo "pytest is not installed for $(PYTHON) (apt-get install python3-pytest python3-pandas python3-tqdm)"; exit 1; \
	else \
		echo "SKIPPING the Python tests: pytest is not installed for $(PYTHON) (apt-get install python3-pytest python3-pandas python3-tqdm)"; \
	fi

# Regenerate the gRPC/Connect code beside the protos (proto/scimesh/v1) after
# formatting and linting them, then stamp it: proto/scimesh/v1/generated.sum
# records the hashes of the inputs and of the generated files and the
# generators' versions, and the test of proto/stamp checks the tree against it
# in milliseconds, without building buf. Every generated file under proto/ is
# deleted first, so none is left behind. buf runs from its own tool module
# (tools/go.mod) and the plugins are this module's tools; see buf.gen.yaml.
BUF = go tool -modfile=tools/go.mod buf
proto:
	$(BUF) format -w
	$(BUF) lint
	find proto \( -name '*.pb.go' -o -name '*.connect.go' \) -delete
	$(BUF) generate
	go run ./proto/stamp
