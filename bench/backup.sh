#!/usr/bin/env bash
# What backups of stragglers save: a job of 40 chunks (400 rows, 10 a
# chunk) on one `scimesh serve` (a fresh SQLite file each time) and
# workers of concurrency 1 whose workload sleeps 1 s a chunk, or 10 s on
# the slow worker. Each round runs the job three ways, side by side:
#   alone    three fast workers, no slow one;
#   backups  the three and the slow one (speculate_after 3, the default);
#   none     the same four, speculate_after 0.
# It prints each job's time (created_at to finished_at) and the chunks
# that got a backup (an attempt past 1), then the medians and the ratio
# of backups and of none to alone.
# Usage: bench/backup.sh [ROUNDS]   (default 3). BIN=PATH measures another
# build.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. bench/lib.sh
scratch_build

python3 -c 'print("id,text"); [print("r%d,%s" % (i, "x" * (i * 7 % 11 + 1))) for i in range(400)]' >"$dir/table.csv"
cat >"$dir/rank.sh" <<'SH'
sleep "$1"
exec awk -F, 'NR==1{print "id,score";next}{print $1","length($2)}'
SH

# run SLOW SPECULATE starts serve, three fast workers and, when SLOW is
# set, the slow one; runs the job with --speculate-after SPECULATE and
# prints its time and how many chunks got a backup.
run() {
	local slow=$1 speculate=$2 url server id pids=()
	rm -rf "$dir"/work-*
	serve_fresh "$dir" || exit 1
	for w in f1 f2 f3 ${slow:+slow}; do
		local secs=1
		[ "$w" = slow ] && secs=10
		"$bin" worker --coordinator "$url" --id "$w" --concurrency 1 --workload "rank=sh $dir/rank.sh $secs" \
			--work-dir "$dir/work-$w" 2>"$dir/$w.log" &
		pids+=($!)
	done
	sleep 1 # the workers are polling
	id=$(SCIMESH_COORDINATOR=$url "$bin" submit "$dir/table.csv" --workload rank --chunk-rows 10 --top-k 5 \
		--no-cache --speculate-after "$speculate" 2>/dev/null)
	local secs again
	read -r secs _ again _ < <(job_done "$url" "$id")
	echo "$secs s  backups $again"
	kill "${pids[@]}" "$server"
	wait "${pids[@]}" "$server" 2>/dev/null || true
}

for _ in $(seq "$rounds"); do
	echo "alone    $(run "" 3)"
	echo "backups  $(run slow 3)"
	echo "none     $(run slow 0)"
done | tee "$dir/runs.txt"
alone=$(median_of alone "$dir/runs.txt" %.2f)
backups=$(median_of backups "$dir/runs.txt" %.2f)
none=$(median_of none "$dir/runs.txt" %.2f)
echo "medians: alone $alone s, backups $backups s, none $none s;" \
	"backups/alone $(python3 -c "print('%.2f' % ($backups / $alone))")x, none/alone $(python3 -c "print('%.2f' % ($none / $alone))")x"
