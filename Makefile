# The one command that runs every check: make test
.PHONY: test vet fmt lint unit build proto

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

# Regenerate the gRPC/Connect code beside the protos (proto/scimesh/v1) after
# formatting and linting them. buf runs from its own tool module (tools/go.mod)
# and the plugins are this module's tools; see buf.gen.yaml.
BUF = go tool -modfile=tools/go.mod buf
proto:
	$(BUF) format -w
	$(BUF) lint
	rm -f proto/scimesh/v1/*.pb.go proto/scimesh/v1/scimeshv1connect/*.connect.go
	$(BUF) generate
