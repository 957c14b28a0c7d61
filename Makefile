# The one command that runs every check: make test
.PHONY: test vet fmt lint unit build

test: fmt vet lint unit

build:
	go build -o bin/scimesh ./cmd/scimesh

fmt:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

lint:
	go tool staticcheck ./...

unit:
	go test -race -count=1 -timeout 15m ./...
