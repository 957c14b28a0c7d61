#!/usr/bin/env bash
# Task lifecycles per second with the load in a process of its own: each
# run starts `scimesh serve` on a fresh database (a new SQLite file, or a
# new database of one throwaway PostgreSQL cluster, from bin/river-bench
# -serve), with tokens, and drives it from a second process with
# `scimesh-bench --coordinator`: REST single form (claim, then result),
# REST batch 50 (max_tasks 50, POST /tasks/results) and gRPC (Worker.Poll,
# then Done, on single-task trees). The forms single_lean and
# batch50_lean are single and batch50 driven by the lean load generator
# (`bench --load lean`: fasthttp's requests on connections of its own, a
# fraction of net/http's CPU per request), so that less of the two cores
# the load generator shares with serve goes to the client. The forms
# single_versioned and batch50_versioned send a workload version with
# every claim and result, as every `scimesh worker` does, announced before
# the job is created (its creation looks the chunks up in the chunk cache,
# and each result remembers its output); single_late and batch50_late
# announce it only with the first claims, so each claim looks its chunks
# up too.
# Usage: bench/load.sh [ROUNDS]   (default 3; prints every run, then medians)
# TASKS (50000), BACKLOG (10000), WORKERS (64), STORES ("sqlite postgres")
# and FORMS ("single batch50 grpc") change what is run; the form "river"
# (PostgreSQL only) runs River's own harness, bench/river, with TASKS
# no-op jobs on the same cluster, in the same rounds. BEFORE=BINARY also
# runs each case on a serve built earlier (e.g. from the commit before a
# change), alternating with this tree's, so both are measured on the same
# machine at the same time; the load comes from this tree's bench, or with
# BEFORE_LOAD=1 from the earlier build's for its runs (for a change to the
# client the load generator shares with workers).
# The store "floor" (STORES="floor sqlite …") runs bench/floor in serve's
# place for the REST forms: a server that answers the same calls with
# bodies like serve's and no queue behind them, the most any coordinator
# behind this API could do on this machine.
# CPU=1 also prints, for each run, the CPU time per lifecycle of serve (or
# bench/floor), of every PostgreSQL process and of the load generator:
# serve's and PostgreSQL's over the timed part (utime and stime from
# /proc/PID/stat, from the seeding's end to the last lifecycle), the load
# generator's over its whole run (/usr/bin/time), its seeding included.
# PROFILE=DIR profiles serve instead, once per store, under the single
# form (or the form PROFILE_FORM names): a 20 s CPU profile through serve --pprof (DIR/STORE.pprof and
# DIR/STORE.top, `go tool pprof -top -cum`), the statements' figures from
# pg_stat_statements (DIR/statements.txt) and samples of pg_stat_activity
# every 0.2 s (DIR/activity.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
tasks=${TASKS:-50000}
[ -z "${PROFILE:-}" ] || tasks=${TASKS:-200000}
backlog=${BACKLOG:-10000}
workers=${WORKERS:-64}
stores=${STORES:-sqlite postgres}
forms=${FORMS:-single batch50 grpc}
profile=${PROFILE:-}
before=${BEFORE:-}
builds=now
[ -z "$before" ] || builds="now before"

go build -o bin/scimesh ./cmd/scimesh
go build -o bin/scimesh-bench ./cmd/scimesh-bench
go build -o bin/floor ./bench/floor
(cd bench/river && go build -o ../../bin/river-bench .)

. bench/lib.sh
bench_tokens

work=$(mktemp -d)
cluster=
server=
cleanup() {
	[ -z "$server" ] || { kill "$server" 2>/dev/null && wait "$server" || true; }
	[ -z "$cluster" ] || { kill "$cluster" 2>/dev/null && wait "$cluster" || true; }
	rm -rf "$work"
}
trap cleanup EXIT

admin=
if [[ " $stores " == *" postgres "* ]]; then
	preload=()
	[ -z "$profile" ] || preload=(-preload pg_stat_statements)
	bin/river-bench -serve "${preload[@]}" >"$work/cluster.log" &
	cluster=$!
	for _ in $(seq 600); do
		[ -s "$work/cluster.log" ] && break
		kill -0 "$cluster" 2>/dev/null || { echo "the cluster did not start" >&2; exit 1; }
		sleep 0.1
	done
	admin=$(head -1 "$work/cluster.log")
	[ -n "$admin" ] || { echo "the cluster did not print its URL" >&2; exit 1; }
fi
dburl() { echo "${admin/\/postgres\?//$1?}"; }
sql() { psql "$admin" -v ON_ERROR_STOP=1 -qAtc "$1"; }


serve_bin=bin/scimesh

# serve_start DB [ARGS…] starts serve on a free loopback port and waits
# until it is ready; $url is its URL.
serve_start() {
	local db=$1
	shift
	url=http://127.0.0.1:$(freeport)
	if [ "$db" = floor ]; then
		bin/floor -addr "${url#http://}" 2>"$work/serve.log" &
		server=$!
		wait_ready "$url" "$server" "$work/serve.log" || exit 1
		return
	fi
	# warn: info would log a line per request, which costs the server.
	"$serve_bin" serve --addr "${url#http://}" --db "$db" --migrate --log-level warn "$@" 2>"$work/serve.log" &
	server=$!
	wait_ready "$url" "$server" "$work/serve.log" || exit 1
}


# newdb STORE NAME prints a fresh database's URL.
newdb() {
	if [ "$1" = floor ]; then
		echo floor
	elif [ "$1" = sqlite ]; then
		mkdir -p "$work/$2"
		echo "sqlite:$work/$2/scimesh.db"
	else
		sql "CREATE DATABASE $2"
		dburl "$2"
	fi
}

dropdb() {
	if [ "$1" = floor ]; then :; elif [ "$1" = sqlite ]; then rm -rf "${work:?}/$2"; else sql "DROP DATABASE $2 WITH (FORCE)"; fi
}

formargs() {
	case $1 in
	single) echo --batch 1 ;;
	batch50) echo --batch 50 ;;
	single_lean) echo --batch 1 --load lean ;;
	batch50_lean) echo --batch 50 --load lean ;;
	single_versioned) echo --batch 1 --workload-version v1 ;;
	batch50_versioned) echo --batch 50 --workload-version v1 ;;
	single_late) echo --batch 1 --workload-version v1 --announce-late ;;
	batch50_late) echo --batch 50 --workload-version v1 --announce-late ;;
	grpc) echo --protocol grpc ;;
	*) echo "unknown form $1" >&2; exit 1 ;;
	esac
}

loadgen=(bin/scimesh-bench)
bench() { "${loadgen[@]}" --coordinator "$url" --workers "$workers" --tasks "$tasks" --backlog "$backlog" "$@"; }

# cputicks PID… prints "PID TICKS" for each process: the CPU time (clock
# ticks) it used so far.
cputicks() {
	local p f
	for p in "$@"; do
		read -ra f <"/proc/$p/stat" 2>/dev/null && echo "$p $((f[13] + f[14]))"
	done
}

# bench_cpu STORE ARGS… is bench ARGS…, and then prints the CPU per
# lifecycle of serve, PostgreSQL (for STORE postgres) and the load
# generator (see CPU= above). PostgreSQL's processes are those there at
# the end (the pool of serve's connections grows during a run); one that
# started during the run counts from zero.
bench_cpu() {
	local store=$1 load hz before
	shift
	/usr/bin/time -f '%U %S' -o "$work/time" "${loadgen[@]}" --coordinator "$url" --workers "$workers" \
		--tasks "$tasks" --backlog "$backlog" "$@" >"$work/bench.out" &
	load=$!
	until grep -q seeded "$work/bench.out"; do
		kill -0 "$load" 2>/dev/null || break
		sleep 0.02
	done
	pg() { [ "$store" != postgres ] || pgrep -x postgres; }
	# shellcheck disable=SC2046 # one PID a word
	before=$({ cputicks "$server"; cputicks $(pg); } | sed 's/^/before /')
	wait "$load"
	hz=$(getconf CLK_TCK)
	cat "$work/bench.out"
	# shellcheck disable=SC2046
	{
		echo "$before"
		cputicks "$server" | sed 's/^/serve /'
		cputicks $(pg) | sed 's/^/pg /'
		sed 's/^/load /' "$work/time"
	} | awk -v hz="$hz" -v n="$tasks" -v pg="$([ "$store" = postgres ] && echo 1)" '
		$1 == "before" { start[$2] = $3 }
		$1 == "serve" { s = $3 - start[$2] }
		$1 == "pg" { p += $3 - start[$2] }
		$1 == "load" && NF == 3 { l = $2 + $3 }
		END {
			printf "cpu per lifecycle: serve %.0f µs", s / hz / n * 1e6
			if (pg) printf ", PostgreSQL %.0f µs", p / hz / n * 1e6
			printf ", load generator %.0f µs (with its seeding)\n", l / n * 1e6
		}'
}

echo "$(nproc) cores;$(uptime | sed 's/.*load average/ load average/')"
[ -z "$admin" ] || echo "PostgreSQL $(sql 'SHOW server_version'), fsync=$(sql 'SHOW fsync'), synchronous_commit=$(sql 'SHOW synchronous_commit')"

if [ -n "$profile" ]; then
	mkdir -p "$profile"
	for store in $stores; do
		[ "$store" != floor ] || continue # bench/floor has no profile to take
		db=$(newdb "$store" profile_db)
		pprof=127.0.0.1:$(freeport)
		serve_start "$db" --pprof "$pprof"
		if [ "$store" = postgres ]; then
			psql "$db" -qAtc 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()' >/dev/null
		fi
		# shellcheck disable=SC2046 # formargs's words are flags
		bench $(formargs "${PROFILE_FORM:-single}") >"$work/bench.out" &
		load=$!
		# The seeding (one POST /jobs) takes a second or two; then 20 s
		# of the workers: give them enough tasks (TASKS, default 200,000
		# here) to outlast the profile at several thousand a second.
		sleep 5
		if [ "$store" = postgres ]; then
			echo "SELECT now()::time(1), state, count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1, 2 ORDER BY 2 \\watch 0.2" |
				psql "$db" -qAt >"$profile/activity.txt" 2>/dev/null &
			watcher=$!
		fi
		curl -fs -o "$profile/$store.pprof" "http://$pprof/debug/pprof/profile?seconds=20"
		if [ "$store" = postgres ]; then kill "$watcher"; wait "$watcher" 2>/dev/null || true; fi
		wait "$load"
		echo "$store, ${PROFILE_FORM:-single}, profiled: $(tail -1 "$work/bench.out")"
		go tool pprof -top -cum "$profile/$store.pprof" >"$profile/$store.top" 2>/dev/null
		if [ "$store" = postgres ]; then
			psql "$db" -qA -F ' | ' -c "SELECT calls, round(total_exec_time::numeric, 0) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms, rows,
				left(regexp_replace(query, '\s+', ' ', 'g'), 160) AS query FROM pg_stat_statements
				WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT 25" >"$profile/statements.txt"
		fi
		serve_stop
		dropdb "$store" profile_db
	done
	echo "profiles in $profile; $(uptime | sed 's/.*load average/load average/')"
	exit 0
fi

declare -A rates
for round in $(seq "$rounds"); do
	for store in $stores; do
		for form in $forms; do
			if [ "$form" = river ]; then
				[ "$store" = postgres ] || continue
				db=$(newdb postgres "river_$round")
				line=$(bin/river-bench -db "$db" -jobs "$tasks" | tail -1)
				dropdb postgres "river_$round"
				echo "postgres, river: $line"
				rates[$store.$form.now]+="$(sed -E 's/.* = ([0-9,]+) jobs\/s.*/\1/; s/,//g' <<<"$line") "
				continue
			fi
			[ "$store" != floor ] || [ "$form" != grpc ] || continue
			for build in $builds; do
				[ "$store" != floor ] || [ "$build" = now ] || continue
				serve_bin=bin/scimesh
				[ "$build" = now ] || serve_bin=$before
				loadgen=(bin/scimesh-bench)
				# An earlier build carries the load generator as scimesh bench.
				[ "$build" = now ] || [ -z "${BEFORE_LOAD:-}" ] || loadgen=("$before" bench)
				name=scimesh_${round}_${form}_$build
				db=$(newdb "$store" "$name")
				serve_start "$db"
				# shellcheck disable=SC2046 # formargs's words are flags
				cpu=
				if [ -n "${CPU:-}" ]; then
					out=$(bench_cpu "$store" $(formargs "$form"))
					line=$(grep lifecycles/s <<<"$out")
					cpu=$(grep 'cpu per' <<<"$out")
				else
					line=$(bench $(formargs "$form") | tail -1)
				fi
				serve_stop
				dropdb "$store" "$name"
				echo "$store, $form, $build: $line"
				[ -z "$cpu" ] || echo "$store, $form, $build: $cpu"
				rates[$store.$form.$build]+="$(sed -E 's/.* = ([0-9.]+) lifecycles\/s.*/\1/' <<<"$line") "
			done
		done
	done
done

echo "medians over $rounds rounds, $workers workers, $tasks tasks, backlog $backlog ($(uptime | sed 's/.*load average/load average/')):"
for store in $stores; do
	for form in $forms; do
		if [ "$form" = river ]; then
			[ "$store" = postgres ] || continue
			echo "  postgres, river $(cd bench/river && go list -m -f '{{.Version}}' github.com/riverqueue/river) (in-process, 2,000 workers): $(median <<<"${rates[$store.$form.now]}") jobs/s"
			continue
		fi
		[ "$store" != floor ] || [ "$form" != grpc ] || continue
		for build in $builds; do
			[ "$store" != floor ] || [ "$build" = now ] || continue
			echo "  $store, $form, $build: $(median <<<"${rates[$store.$form.$build]}") lifecycles/s"
		done
	done
done
