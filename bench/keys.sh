#!/usr/bin/env bash
# Worker keys and quorum, side by side: each case runs its two variants in
# turn (which goes first alternates by round), each on a fresh database (a
# new SQLite file, or a new database of one throwaway PostgreSQL cluster
# from bin/river-bench -serve) and a fresh `scimesh serve`, driven from a
# second process by `scimesh-bench --coordinator`.
# Cases (CASES, default all):
#   key_single, key_batch50  the pool's WORKER_AUTH_TOKEN against a trusted
#                            worker key (looked up on every request), the
#                            single and the batch 50 forms: lifecycles/s
#   quorum_single            a job open to any worker, run by untrusted
#                            keys of two accounts (half the workers each),
#                            with quorum 1 against quorum 2: chunks/s
#   quorum_batch20           the same, each worker claiming 20 at a time
# Usage: bench/keys.sh [ROUNDS]   (default 3; prints every run, then medians,
# and the median and range of the rounds' own ratios)
# TASKS (50000), BACKLOG (10000), WORKERS (64) and STORES ("sqlite
# postgres") change what is run. After each run it prints serve's peak
# resident set (VmHWM).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
tasks=${TASKS:-50000}
backlog=${BACKLOG:-10000}
workers=${WORKERS:-64}
stores=${STORES:-sqlite postgres}
cases=${CASES:-key_single key_batch50 quorum_single quorum_batch20}

go build -o bin/scimesh ./cmd/scimesh
go build -o bin/scimesh-bench ./cmd/scimesh-bench
(cd bench/river && go build -o ../../bin/river-bench .)

. bench/lib.sh
bench_tokens

bench_databases "$stores"

# key URL ACCOUNT prints a new worker key of a new account ACCOUNT.
key() {
	local token
	token=$(SCIMESH_COORDINATOR=$1 SCIMESH_TOKEN=$CLIENT_AUTH_TOKEN bin/scimesh account add "$2")
	SCIMESH_COORDINATOR=$1 SCIMESH_TOKEN=$token bin/scimesh worker-key add bench 2>/dev/null
}

# run STORE CASE VARIANT NAME prints the bench's lines for one run and
# serve's peak resident set.
run() {
	local store=$1 case=$2 variant=$3 name=$4 db k1 k2
	db=$(newdb "$store" "$name")
	url=http://127.0.0.1:$(freeport)
	bin/scimesh serve --addr "${url#http://}" --db "$db" --migrate --log-level warn \
		--data-dir "$work/$name.data" 2>"$work/serve.log" &
	server=$!
	wait_ready "$url" "$server" "$work/serve.log" || exit 1
	local b=(bin/scimesh-bench --coordinator "$url" --workers "$workers" --tasks "$tasks" --backlog "$backlog")
	case $case in
	key_single | key_batch50)
		[ "$case" = key_single ] && b+=(--batch 1) || b+=(--batch 50)
		if [ "$variant" = key ]; then
			k1=$(key "$url" a1)
			SCIMESH_COORDINATOR=$url SCIMESH_TOKEN=$CLIENT_AUTH_TOKEN bin/scimesh worker-key trust a1/bench >/dev/null
			b+=(--worker-token "$k1")
		fi
		;;
	quorum_single | quorum_batch20)
		k1=$(key "$url" a1)
		k2=$(key "$url" a2)
		[ "$case" = quorum_single ] && b+=(--batch 1) || b+=(--batch 20)
		b+=(--worker-tokens "$k1,$k2" --job-workers any --quorum "${variant#q}")
		;;
	*) echo "unknown case $case" >&2; exit 1 ;;
	esac
	"${b[@]}" 2>&1 | grep -v seeded || true
	echo "serve $(grep VmHWM "/proc/$server/status" | tr -s ' \t' ' ')"
	kill "$server"
	wait "$server" || true
	server=
	dropdb "$store" "$name"
}

variants() { case $1 in key_*) echo "pool key" ;; quorum_*) echo "q1 q2" ;; esac; }

echo "$(nproc) cores;$(uptime | sed 's/.*load average/ load average/')"
declare -A figures
for round in $(seq "$rounds"); do
	for store in $stores; do
		for case in $cases; do
			order=$(variants "$case")
			[ $((round % 2)) -eq 1 ] || order=$(tr ' ' '\n' <<<"$order" | tac | tr '\n' ' ')
			for variant in $order; do
				out=$(run "$store" "$case" "$variant" "keys_${round}_${case}_$variant" 2>&1) || out+=$'\n'"the run failed"
				sed "s/^/$store, $case, $variant: /" <<<"$out"
				case $case in
				quorum_*) f=$(sed -nE 's/.* = ([0-9.]+) chunks\/s.*/\1/p' <<<"$out") ;;
				*) f=$(sed -nE 's/.* = ([0-9.]+) lifecycles\/s.*/\1/p' <<<"$out") ;;
				esac
				figures[$store.$case.$variant]+="$f "
				rss=$(sed -nE 's/^serve VmHWM: ([0-9]+) kB/\1/p' <<<"$out")
				figures[$store.$case.$variant.rss]+="$rss "
			done
		done
	done
done

echo "medians over $rounds rounds, $workers workers ($(uptime | sed 's/.*load average/load average/')):"
for store in $stores; do
	for case in $cases; do
		read -r a b <<<"$(variants "$case")"
		if [ -z "${figures[$store.$case.$a]// /}" ] || [ -z "${figures[$store.$case.$b]// /}" ]; then
			echo "  $store, $case: runs failed (see above)"
			continue
		fi
		fa=$(median %.0f <<<"${figures[$store.$case.$a]}")
		fb=$(median %.0f <<<"${figures[$store.$case.$b]}")
		unit="lifecycles/s"
		[[ $case != quorum_* ]] || unit="chunks/s"
		# Each round's own ratio, its two runs side by side in time: the
		# median of these is the steadier figure on a machine whose speed
		# drifts between rounds.
		pairs=$(paste -d ' ' <(tr ' ' '\n' <<<"${figures[$store.$case.$a]}" | grep .) \
			<(tr ' ' '\n' <<<"${figures[$store.$case.$b]}" | grep .) | awk '$1 > 0 {printf "%f ", $2 / $1}')
		echo "  $store, $case: $a $fa, $b $fb $unit = $(awk -v x="$fb" -v y="$fa" 'BEGIN {printf "%.2f", x / y}')× $a" \
			"(median of the rounds' ratios $(median %.2f <<<"$pairs")×, range $(tr ' ' '\n' <<<"$pairs" | grep . | sort -g | sed -n '1p;$p' | xargs printf '%.2f ' | sed 's/ $//; s/ /–/'));" \
			"serve peak RSS $a $(median %.0f <<<"${figures[$store.$case.$a.rss]}") kB, $b $(median %.0f <<<"${figures[$store.$case.$b.rss]}") kB"
	done
done
