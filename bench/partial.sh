#!/usr/bin/env bash
# What a look at a running job costs: a job of 1,000 chunks (5,000,000
# rows of 256-bit fingerprints, chunks of 5,000, top_k 100) on the
# built-in tanimoto, one `scimesh serve` on a fresh SQLite file and one
# `scimesh worker --concurrency 2`. Each round runs the job twice, in
# turn (which goes first alternates): once alone, once while a client in
# its own process (started before the job) asks
# GET /jobs/{id}/result?partial=true every POLL seconds (default 0.25;
# the dashboard's job page asks every 5).
# It prints each run's job time (created_at to finished_at) and, for the
# polled run, the partial answers' latency (median, 95th percentile,
# worst) over those made after 100 chunks completed; then the medians.
# Usage: bench/partial.sh [ROUNDS]   (default 3). BIN=PATH measures another
# build.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
poll=${POLL:-0.25}
. bench/lib.sh
scratch_build

query=$(fingerprints "$dir/fp.csv" 5000000 256)

# run MODE prints one line: the job's time, and with MODE poll the
# partial answers' latencies.
run() {
	local mode=$1 url server worker job poller=
	serve_fresh "$dir" || exit 1
	rm -f "$dir/job"
	if [ "$mode" = poll ]; then
		# Started before the job, so that its start-up is not the job's.
		python3 - "$url" "$dir/job" "$poll" >"$dir/poll.txt" <<'PY' &
import os, sys, time, urllib.request
url, jobfile, every = sys.argv[1], sys.argv[2], float(sys.argv[3])
while not os.path.exists(jobfile):
    time.sleep(0.01)
job = open(jobfile).read().strip()
while True:
    t = time.perf_counter()
    with urllib.request.urlopen(f"{url}/jobs/{job}/result?partial=true") as r:
        r.read()
        done, total = int(r.headers["SciMesh-Chunks-Done"]), int(r.headers["SciMesh-Chunks-Total"])
    print(done, (time.perf_counter() - t) * 1000, flush=True)
    if done == total:
        break
    time.sleep(every)
PY
		poller=$!
		sleep 1
	fi
	job=$(SCIMESH_COORDINATOR=$url "$bin" submit "$dir/fp.csv" --workload tanimoto --chunk-rows 5000 --top-k 100 \
		--param query="$query" 2>/dev/null)
	echo "$job" >"$dir/job.tmp" && mv "$dir/job.tmp" "$dir/job"
	"$bin" worker --coordinator "$url" --id w --concurrency 2 --workload tanimoto --work-dir "$dir/work" 2>"$dir/worker.log" &
	worker=$!
	local secs
	secs=$(job_done "$url" "$job" | awk '{printf "%.2f", $1}')
	[ -z "$poller" ] || wait "$poller" || true
	kill "$worker" 2>/dev/null || true
	wait "$worker" 2>/dev/null || true
	local rss
	rss=$(grep VmHWM "/proc/$server/status" | tr -s ' \t' ' ')
	kill "$server"
	wait "$server" || true
	if [ "$mode" = poll ]; then
		echo "poll  job ${secs} s  partial $(python3 - "$dir/poll.txt" <<'PY'
import statistics, sys
ms = sorted(float(l.split()[1]) for l in open(sys.argv[1]) if int(l.split()[0]) >= 100)
if not ms:
    print("no answers after 100 chunks"); sys.exit()
p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
print("median %.1f ms  p95 %.1f ms  max %.1f ms  (%d answers)" % (statistics.median(ms), p95, ms[-1], len(ms)))
PY
)  serve${rss#VmHWM:}"
	else
		echo "quiet job ${secs} s  serve${rss#VmHWM:}"
	fi
}

for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then order="quiet poll"; else order="poll quiet"; fi
	for m in $order; do run "$m"; done
done | tee "$dir/runs.txt"
for m in quiet poll; do
	echo "$m: median job $(grep "^$m" "$dir/runs.txt" | awk '{print $3}' | median %.2f) s"
done
echo "poll: median partial latency $(grep '^poll' "$dir/runs.txt" | sed 's/.*partial median \([0-9.]*\).*/\1/' | median %.1f) ms"
