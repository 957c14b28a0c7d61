#!/usr/bin/env bash
# River beside SciMesh: on one throwaway PostgreSQL cluster, in one run,
# River's throughput on no-op jobs (bench/river, a module of its own) and
# SciMesh's task lifecycles per second over loopback HTTP, single and batch
# forms. Rounds alternate the three, so that a change in the machine's load
# falls on all of them; each SciMesh run gets a new database, River empties
# its job table before each run.
# Usage: bench/river.sh [ROUNDS]   (default 3; prints every run, then medians)
# JOBS sets the jobs (River) and tasks (SciMesh) per run, default 50000.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
jobs=${JOBS:-50000}

go build -o bin/scimesh ./cmd/scimesh
(cd bench/river && go build -o ../../bin/river-bench .)

log=$(mktemp)
bin/river-bench -serve >"$log" &
server=$!
cleanup() {
	kill "$server" 2>/dev/null && wait "$server" || true
	rm -f "$log"
}
trap cleanup EXIT
for _ in $(seq 600); do
	[ -s "$log" ] && break
	kill -0 "$server" 2>/dev/null || { echo "the cluster did not start" >&2; exit 1; }
	sleep 0.1
done
admin=$(head -1 "$log")
[ -n "$admin" ] || { echo "the cluster did not print its URL" >&2; exit 1; }
dburl() { echo "${admin/\/postgres\?//$1?}"; }
sql() { psql "$admin" -v ON_ERROR_STOP=1 -qAtc "$1"; }

echo "PostgreSQL $(sql 'SHOW server_version'), fsync=$(sql 'SHOW fsync'), synchronous_commit=$(sql 'SHOW synchronous_commit'); $(nproc) cores;$(uptime | sed 's/.*load average/ load average/')"
sql 'CREATE DATABASE river'

declare -A rates
for round in $(seq "$rounds"); do
	line=$(bin/river-bench -db "$(dburl river)" -jobs "$jobs")
	echo "$line"
	rates[river]+="$(sed -E 's/.* = ([0-9,]+) jobs\/s.*/\1/; s/,//g' <<<"$line") "
	for batch in 1 50; do
		db=scimesh_${round}_b${batch}
		sql "CREATE DATABASE $db"
		line=$(bin/scimesh bench --db "$(dburl "$db")" --workers 64 --tasks "$jobs" --batch "$batch" | tail -1)
		echo "scimesh: $line"
		rates[b$batch]+="$(sed -E 's/.* = ([0-9.]+) lifecycles\/s.*/\1/' <<<"$line") "
		sql "DROP DATABASE $db"
	done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {m = NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%.0f", m}'; }
echo "medians over $rounds rounds ($(uptime | sed 's/.*load average/load average/')):"
echo "  river $(cd bench/river && go list -m -f '{{.Version}}' github.com/riverqueue/river), workers 2000:  $(median <<<"${rates[river]}") jobs/s"
echo "  scimesh, 64 workers over HTTP, batch 1:   $(median <<<"${rates[b1]}") lifecycles/s"
echo "  scimesh, 64 workers over HTTP, batch 50:  $(median <<<"${rates[b50]}") lifecycles/s"
