#!/usr/bin/env bash
# How soon `scimesh submit --wait` learns that its job is done: each run
# submits a job of 4 chunks to one `scimesh serve` on a fresh SQLite file
# with one `scimesh worker`, and measures the time from the stitch's commit
# (the job's finished_at, set in the stitch's transaction) to the submit
# process exiting, result downloaded and written.
# Usage: bench/waitjob.sh [RUNS]   (default 9; prints every run in ms, then
# the median). WORKLOAD=tanimoto (default: 4 chunks of 1,000 fingerprints,
# a job of about 0.1 s) or slow (a command that takes 0.7 s a chunk).
# BIN=PATH measures another build of scimesh; PORT (a free one) the listener.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
workload=${WORKLOAD:-tanimoto}
dir=$(mktemp -d)
bin=${BIN:-$dir/scimesh}
[ -n "${BIN:-}" ] || go build -o "$bin" ./cmd/scimesh
. bench/lib.sh

query=$(fingerprints "$dir/fp.csv" 4000 2048)
cat >"$dir/slow.sh" <<'SH'
#!/bin/sh
cat >/dev/null
sleep 0.7
echo id,score
echo a,1
SH
chmod +x "$dir/slow.sh"

port=${PORT:-$(freeport)}
url=http://127.0.0.1:$port
"$bin" serve --addr 127.0.0.1:$port --data-dir "$dir/data" --db "sqlite:$dir/data/scimesh.db" >"$dir/serve.log" 2>&1 &
serve=$!
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
wait_ready "$url" "$serve" "$dir/serve.log"
"$bin" worker --coordinator "$url" --work-dir "$dir/work" --workload tanimoto --workload "slow=$dir/slow.sh" >"$dir/worker.log" 2>&1 &

for _ in $(seq "$runs"); do
  "$bin" submit "$dir/fp.csv" --coordinator "$url" --workload "$workload" --param "query=$query" \
      --top-k 10 --chunk-rows 1000 --wait --output "$dir/top.csv" 2>"$dir/submit.err"
  end=$(date +%s.%N)
  job=$(sed -n 's/^job \([^ ]*\): [0-9]* chunks$/\1/p' "$dir/submit.err")
  curl -sf "$url/jobs/$job" | python3 -c '
import datetime, json, sys
fin = datetime.datetime.fromisoformat(json.load(sys.stdin)["finished_at"].replace("Z", "+00:00"))
print("%.1f" % ((float(sys.argv[1]) - fin.timestamp()) * 1000))' "$end"
done | tee "$dir/ms"
echo "median $(median "%.1f" <"$dir/ms") ms over $(grep -c . "$dir/ms") runs"
