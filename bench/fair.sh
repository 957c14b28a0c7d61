#!/usr/bin/env bash
# Fair share against FIFO, side by side: each case runs `scimesh serve
# --scheduling fifo` and `--scheduling fair` in turn (which goes first
# alternates by round), each on a fresh database (a new SQLite file, or a
# new database of one throwaway PostgreSQL cluster from bin/river-bench
# -serve), driven from a second process by `scimesh-bench --coordinator`.
# Cases (CASES, default all):
#   one_single, one_batch50  one account's one job (the admin's, created
#                            over REST), the single and the batch 50 forms
#   many_single, many_batch50  100 accounts of 10 jobs each (made in the
#                            database with --accounts --seed-db)
#   two_single               2 accounts of one job each, the single form:
#                            every claim stamps one of two account rows,
#                            the contention a hot row per account would show
#   weights                  2 accounts weighing 1 and 3, tasks held 20 ms
#   small                    `bench small`: a 4-chunk job created 2 s after
#                            another account's 300-chunk one, 2 workers,
#                            0.2 s a task
# Usage: bench/fair.sh [ROUNDS]   (default 3; prints every run, then medians)
# TASKS (50000), BACKLOG (10000), WORKERS (64), STORES ("sqlite postgres")
# and LOAD (client; or lean) change what is run. After each run it prints
# serve's peak resident set (VmHWM).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
tasks=${TASKS:-50000}
backlog=${BACKLOG:-10000}
workers=${WORKERS:-64}
stores=${STORES:-sqlite postgres}
cases=${CASES:-one_single one_batch50 many_single many_batch50 two_single weights small}
load=${LOAD:-client}

go build -o bin/scimesh ./cmd/scimesh
go build -o bin/scimesh-bench ./cmd/scimesh-bench
(cd bench/river && go build -o ../../bin/river-bench .)

. bench/lib.sh
bench_tokens

bench_databases "$stores"

# run STORE CASE SCHEDULING NAME prints the bench's lines for one run and
# serve's peak resident set.
run() {
	local store=$1 case=$2 sched=$3 name=$4 db
	db=$(newdb "$store" "$name")
	url=http://127.0.0.1:$(freeport)
	bin/scimesh serve --addr "${url#http://}" --db "$db" --migrate --log-level warn --scheduling "$sched" \
		--data-dir "$work/$name.data" 2>"$work/serve.log" &
	server=$!
	wait_ready "$url" "$server" "$work/serve.log" || exit 1
	local b=(bin/scimesh-bench --coordinator "$url" --workers "$workers" --load "$load")
	case $case in
	one_single) "${b[@]}" --tasks "$tasks" --backlog "$backlog" --batch 1 ;;
	one_batch50) "${b[@]}" --tasks "$tasks" --backlog "$backlog" --batch 50 ;;
	many_single) "${b[@]}" --tasks "$tasks" --backlog "$backlog" --batch 1 --accounts 100 --jobs-per-account 10 --seed-db "$db" ;;
	many_batch50) "${b[@]}" --tasks "$tasks" --backlog "$backlog" --batch 50 --accounts 100 --jobs-per-account 10 --seed-db "$db" ;;
	two_single) "${b[@]}" --tasks "$tasks" --backlog "$backlog" --batch 1 --accounts 2 --jobs-per-account 1 --seed-db "$db" ;;
	weights) "${b[@]}" --tasks $((tasks / 5)) --backlog "$backlog" --batch 1 --accounts 2 --weights 1,3 --task-time 20ms --seed-db "$db" ;;
	small) bin/scimesh-bench small --coordinator "$url" --seed-db "$db" ;;
	*) echo "unknown case $case" >&2; exit 1 ;;
	esac 2>&1 | grep -v seeded || true
	echo "serve $(grep VmHWM "/proc/$server/status" | tr -s ' \t' ' ')"
	kill "$server"
	wait "$server" || true
	server=
	dropdb "$store" "$name"
}

echo "$(nproc) cores;$(uptime | sed 's/.*load average/ load average/')"
declare -A figures
for round in $(seq "$rounds"); do
	order="fifo fair"
	[ $((round % 2)) -eq 1 ] || order="fair fifo"
	for store in $stores; do
		for case in $cases; do
			for sched in $order; do
				out=$(run "$store" "$case" "$sched" "fair_${round}_${case}_$sched" 2>&1) || out+=$'\n'"the run failed"
				sed "s/^/$store, $case, $sched: /" <<<"$out"
				case $case in
				small) f=$(sed -nE 's/.* completed in ([0-9.]+)(m?s), ([0-9.]+)× its own.*/\3/p' <<<"$out") ;;
				weights) f=$(sed -nE 's/.*weight 3\) ([0-9.]+)%.*/\1/p' <<<"$out") ;;
				*) f=$(sed -nE 's/.* = ([0-9.]+) lifecycles\/s.*/\1/p' <<<"$out") ;;
				esac
				figures[$store.$case.$sched]+="$f "
				p99=$(sed -nE 's/.* p99 ([0-9.]+)(m?s|µs) .*/\1 \2/p' <<<"$out" | awk '{print ($2 == "s" ? $1 * 1000 : ($2 == "µs" ? $1 / 1000 : $1))}')
				[ -z "$p99" ] || figures[$store.$case.$sched.p99]+="$p99 "
			done
		done
	done
done

echo "medians over $rounds rounds, $workers workers ($(uptime | sed 's/.*load average/load average/')):"
for store in $stores; do
	for case in $cases; do
		if [ -z "${figures[$store.$case.fifo]// /}" ] || [ -z "${figures[$store.$case.fair]// /}" ]; then
			echo "  $store, $case: runs failed (see above)"
			continue
		fi
		fifo=$(median %.2f <<<"${figures[$store.$case.fifo]}")
		fair=$(median %.2f <<<"${figures[$store.$case.fair]}")
		case $case in
		small) echo "  $store, $case: the small job took ${fifo}× its own work with fifo, ${fair}× with fair" ;;
		weights) echo "  $store, $case: the weight-3 account took ${fifo}% of the lifecycles with fifo, ${fair}% with fair" ;;
		*)
			echo "  $store, $case: fifo $fifo, fair $fair lifecycles/s = $(awk -v a="$fair" -v b="$fifo" 'BEGIN {printf "%.2f", a / b}')× fifo;" \
				"claim p99 fifo $(median %.1f <<<"${figures[$store.$case.fifo.p99]}") ms, fair $(median %.1f <<<"${figures[$store.$case.fair.p99]}") ms"
			;;
		esac
	done
done
