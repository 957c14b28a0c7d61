# syntax=docker/dockerfile:1

# The scimesh binary in a small image: a coordinator (the default command,
# serve), a worker (worker --workload tanimoto …) or the migrations
# (migrate up). compose.yaml runs all three; see "Containers" in README.md.

FROM golang:1.26 AS build
# go.mod asks for a newer Go than an older golang:1.26 image may hold, and
# the image's GOTOOLCHAIN=local would then refuse to build: fetch it instead.
ENV GOTOOLCHAIN=auto
WORKDIR /src
# The modules first, in a layer of their own: it is rebuilt only when
# go.mod or go.sum change, not on every edit of the source.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# A static binary: the SQLite driver is pure Go, so nothing needs cgo.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /scimesh ./cmd/scimesh
# The working directory of the final image, owned by its non-root user
# (distroless's nonroot, 65532): ./scimesh-data (serve's default --data-dir
# and SQLite database) and ./scimesh-work (the worker's --work-dir) land here.
RUN mkdir /data

# No shell and no package manager: the built-in tanimoto workload needs
# neither. A worker that runs commands (--workload NAME=COMMAND, run with
# /bin/sh -c) needs an image of its own with a shell and those commands,
# built FROM one that has them, with /scimesh copied in.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /scimesh /scimesh
COPY --from=build --chown=65532:65532 /data /data
WORKDIR /data
USER 65532:65532
# SCIMESH_ADDR must name 0.0.0.0:8080 (or another address beyond loopback)
# for the port to be reachable from outside the container; serve then
# refuses to start without WORKER_AUTH_TOKEN and CLIENT_AUTH_TOKEN.
EXPOSE 8080
ENTRYPOINT ["/scimesh"]
CMD ["serve"]
