#!/usr/bin/env bash
# What the chunk cache saves: a job over 1,000,000 random 2048-bit
# fingerprints (100 chunks of 10,000, top_k 100) on the built-in
# tanimoto, one `scimesh serve` on a fresh SQLite file and one
# `scimesh worker --concurrency 2`. Each round runs the job, then submits
# it again (the same table uploaded again), then again with top_k 10,
# and prints each one's job time (created_at to finished_at: after the
# upload and the chunking), its whole time from `scimesh submit` (the
# upload of 520 MB included) to completion, how many chunks were claimed
# and how many came from the cache; then the medians and the ratio of the
# first run's job time to the resubmission's.
# Usage: bench/cache.sh [ROUNDS]   (default 3). BIN=PATH measures another
# build.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. bench/lib.sh
scratch_build

query=$(fingerprints "$dir/fp.csv" 1000000 2048)

# job URL TOPK submits the table and prints its job time, claimed and
# cached chunks once it completed.
job() {
	local url=$1 topk=$2 id start
	start=$(date +%s.%N)
	id=$(SCIMESH_COORDINATOR=$url "$bin" submit "$dir/fp.csv" --workload tanimoto --chunk-rows 10000 --top-k "$topk" \
		--param query="$query" 2>/dev/null)
	local secs claimed cached
	read -r secs claimed _ cached < <(job_done "$url" "$id")
	printf '%s s  whole %.2f s  claimed %d  cached %d\n' "$secs" "$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')" "$claimed" "$cached"
}

for _ in $(seq "$rounds"); do
	rm -rf "$dir/work"
	serve_fresh "$dir" || exit 1
	"$bin" worker --coordinator "$url" --id w --concurrency 2 --workload tanimoto --work-dir "$dir/work" 2>"$dir/worker.log" &
	worker=$!
	echo "first  $(job "$url" 100)"
	echo "again  $(job "$url" 100)"
	echo "top10  $(job "$url" 10)"
	kill "$worker" "$server"
	wait "$worker" "$server" 2>/dev/null || true
done | tee "$dir/runs.txt"
first=$(median_of first "$dir/runs.txt" %.3f)
again=$(median_of again "$dir/runs.txt" %.3f)
top10=$(median_of top10 "$dir/runs.txt" %.3f)
echo "medians: first $first s, again $again s, top_k 10 $top10 s; first/again $(python3 -c "print('%.0f' % ($first / $again))")x"
