# Helpers the bench scripts share; source it (. bench/lib.sh) from a
# script that has cd'ed to the repository's root.

# median [FORMAT] prints the median of the numbers on stdin (spaces or
# lines), formatted with printf's FORMAT (default %.0f).
median() {
	tr ' ' '\n' | grep . | sort -g |
		awk -v f="${1:-%.0f}" '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf f, m}'
}

# median_of LABEL FILE [FORMAT] prints the median of the second field of
# FILE's lines that start with the word LABEL.
median_of() { grep "^$1 " "$2" | awk '{print $2}' | median "${3:-%.0f}"; }

# job_done URL JOB waits until job JOB of the coordinator at URL ends,
# fails unless it completed, and prints its seconds from creation to end,
# then how many of its chunks were claimed, claimed more than once (retried
# or backed up), and completed from the cache.
job_done() {
	python3 - "$1" "$2" <<'PY'
import json, sys, time, urllib.request
from datetime import datetime
url, job = sys.argv[1], sys.argv[2]
while True:
    j = json.load(urllib.request.urlopen(f"{url}/jobs/{job}"))
    if j["status"] in ("completed", "failed", "cancelled"):
        break
    time.sleep(0.05)
assert j["status"] == "completed", j
tasks = json.load(urllib.request.urlopen(f"{url}/jobs/{job}/tasks?limit=1000"))["tasks"]
t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
print("%.3f %d %d %d" % ((t(j["finished_at"]) - t(j["created_at"])).total_seconds(),
    sum(1 for x in tasks if x["attempt"] > 0), sum(1 for x in tasks if x["attempt"] > 1), j["tasks"].get("cached", 0)))
PY
}

# scratch_build sets dir, a new directory removed at exit with every
# background process of the script, and bin, this tree's scimesh built
# there (or $BIN, to measure another build).
scratch_build() {
	dir=$(mktemp -d)
	trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
	bin=${BIN:-$dir/scimesh}
	[ -n "${BIN:-}" ] || go build -o "$bin" ./cmd/scimesh
}

# fingerprints FILE ROWS BITS writes to FILE a table (id,fingerprint) of
# ROWS random fingerprints of BITS bits in hex, the same at every call,
# and prints a query fingerprint of BITS bits.
fingerprints() {
	python3 - "$@" <<'PY'
import random, sys
path, rows, bits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(1)
with open(path, "w") as f:
    f.write("id,fingerprint\n")
    for i in range(rows):
        f.write("m%d,%0*x\n" % (i, bits // 4, random.getrandbits(bits)))
random.seed(2)
print("%0*x" % (bits // 4, random.getrandbits(bits)))
PY
}

# serve_fresh DIR starts $bin serve on a free port of loopback with a new
# SQLite database and data directory in DIR, logging warnings to
# DIR/serve.log, waits until it is ready, and sets url and server (its
# PID).
serve_fresh() {
	local port
	port=$(freeport)
	url=http://127.0.0.1:$port
	rm -rf "$1/data" "$1/db"*
	"$bin" serve --addr 127.0.0.1:"$port" --db "sqlite:$1/db" --data-dir "$1/data" --log-level warn 2>"$1/serve.log" &
	server=$!
	wait_ready "$url" "$server" "$1/serve.log"
}

# freeport prints a TCP port free on loopback.
freeport() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# bench_tokens exports two different tokens of 16 random bytes, so that
# serve does not warn of weak ones.
bench_tokens() {
	WORKER_AUTH_TOKEN=$(openssl rand -hex 16)
	CLIENT_AUTH_TOKEN=$(openssl rand -hex 16)
	export WORKER_AUTH_TOKEN CLIENT_AUTH_TOKEN
}

# wait_ready URL PID LOG waits until the coordinator at URL answers
# /ready; it fails, showing LOG, when process PID ends first or after 30 s.
wait_ready() {
	local url=$1 pid=$2 log=$3
	for _ in $(seq 300); do
		curl -fs "$url/ready" >/dev/null 2>&1 && return
		kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; echo "serve ended before it was ready" >&2; return 1; }
		sleep 0.1
	done
	echo "serve not ready after 30 s" >&2
	return 1
}

# serve_stop stops the serve process $server and shows its log,
# $work/serve.log, when it wrote one.
serve_stop() {
	kill "$server"
	wait "$server" || true
	server=
	if [ -s "$work/serve.log" ]; then
		sed 's/^/  serve: /' "$work/serve.log" >&2
	fi
}

# load prints the machine's load average.
load() { uptime | sed 's/.*load average: /load average /'; }

# bench_databases STORES sets up what a series of runs on fresh databases
# needs: $work, a temporary directory; at exit the serve process $server
# (when set) and the cluster are stopped and $work removed; with postgres
# among STORES, a throwaway PostgreSQL cluster from bin/river-bench -serve
# ($admin is its URL). newdb STORE NAME then prints the URL of a new
# database, and dropdb STORE NAME drops it.
bench_databases() {
	work=$(mktemp -d)
	cluster=
	server=
	trap bench_cleanup EXIT
	admin=
	if [[ " $1 " == *" postgres "* ]]; then
		bin/river-bench -serve >"$work/cluster.log" &
		cluster=$!
		for _ in $(seq 600); do
			[ -s "$work/cluster.log" ] && break
			kill -0 "$cluster" 2>/dev/null || { echo "the cluster did not start" >&2; exit 1; }
			sleep 0.1
		done
		admin=$(head -1 "$work/cluster.log")
		[ -n "$admin" ] || { echo "the cluster did not print its URL" >&2; exit 1; }
	fi
}

bench_cleanup() {
	[ -z "$server" ] || { kill "$server" 2>/dev/null && wait "$server" || true; }
	[ -z "$cluster" ] || { kill "$cluster" 2>/dev/null && wait "$cluster" || true; }
	rm -rf "$work"
}

dburl() { echo "${admin/\/postgres\?//$1?}"; }
sql() { psql "$admin" -v ON_ERROR_STOP=1 -qAtc "$1"; }

newdb() {
	if [ "$1" = sqlite ]; then
		mkdir -p "$work/$2"
		echo "sqlite:$work/$2/scimesh.db"
	else
		sql "CREATE DATABASE $2"
		dburl "$2"
	fi
}

dropdb() {
	if [ "$1" = sqlite ]; then rm -rf "${work:?}/$2"; else sql "DROP DATABASE $2 WITH (FORCE)"; fi
}

