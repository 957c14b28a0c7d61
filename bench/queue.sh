#!/usr/bin/env bash
# Task lifecycles per second through a real server, on both stores, with a
# backlog of 10,000 and of 1,000,000 pending tasks, single and batch forms.
# Usage: bench/queue.sh [RUNS]   (prints every run; take the medians)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
go build -o bin/scimesh ./cmd/scimesh
go build -o bin/scimesh-bench ./cmd/scimesh-bench
for db in sqlite postgres; do
	for backlog in 10000 1000000; do
		for batch in 1 32; do
			for _ in $(seq "$runs"); do
				./bin/scimesh-bench --db "$db" --workers 32 --tasks 30000 --backlog "$backlog" --batch "$batch" | tail -1 | sed "s/^/$db /"
			done
		done
	done
done
