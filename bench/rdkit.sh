#!/usr/bin/env bash
# What a worker costs beside a compute-bound command: the RDKit example
# (examples/rdkit/score.py) over 39,992 NCI molecules (rdkit-data's 4,999,
# cycled 8 times under new IDs) in two chunks of 20,000 rows, run by two
# workers of --concurrency 1 on a fresh SQLite coordinator, against the
# same two commands run by hand in parallel on the same two chunk files.
#
# Usage: bench/rdkit.sh [ROUNDS] [BINARY…]   (ROUNDS default 3; BINARY
# default bin/scimesh, built here; several binaries run in turn each
# round, so that they share the machine's noise.) Prints every run, then
# medians per binary:
#   worker_cpu   the worker process's own CPU per chunk (user+system of
#                all its threads, from /proc/PID/task/*/schedstat, from
#                before the submit to after the job's end: claim, download,
#                run, report). Each worker has run a small job before, so
#                that this is not its first task.
#   super_cpu    its children's CPU beside the command: the supervisor and
#                /bin/sh (the worker's cutime+cstime less the command's)
#   command_cpu  the command's CPU per chunk (the shell's `times`)
#   task         the chunk's time in the worker, claim to result (its log's
#                "task completed" duration), and of it the time outside the
#                command (download, start, the output's tail, the report):
#                task less the command's wall time, taken by the shell
#   wall         the whole `submit --wait` (upload, both chunks, the
#                stitch, the download; submit --wait long-polls the job)
#   switches     the worker's context switches per chunk (all threads,
#                voluntary and not, from /proc/PID/task/*/status)
#   faults       the worker's minor page faults per chunk
# and the same two commands by hand: their CPU and wall time per chunk and
# the wall time of running both. Needs Debian's /usr/bin/python3 with python3-rdkit and
# rdkit-data. KEEP=1 keeps the runs' directories (logs, databases).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	go build -o bin/scimesh ./cmd/scimesh
	bins=(bin/scimesh)
fi
python=/usr/bin/python3
smi=/usr/share/RDKit/Data/NCI/first_5K.smi
query='c1ccccc1C(=O)O'
"$python" -c 'import rdkit' 2>/dev/null && [ -r "$smi" ] || {
	echo "needs RDKit: apt-get update && apt-get install -y python3-rdkit rdkit-data" >&2
	exit 1
}

. bench/lib.sh
bench_tokens

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# The table: 8 rounds of the NCI sample, each ID suffixed with its round.
"$python" examples/rdkit/nci_to_csv.py "$smi" >"$work/one.csv"
{
	head -1 "$work/one.csv"
	for r in 1 2 3 4 5 6 7 8; do tail -n +2 "$work/one.csv" | sed "s/^nci-\([^,]*\)/nci-\1-$r/"; done
} >"$work/nci.csv"
rows=$(($(wc -l <"$work/nci.csv") - 1))
head -201 "$work/nci.csv" >"$work/warm.csv"
# The chunks the coordinator makes of it (chunk_rows 20000, each with the header).
head -20001 "$work/nci.csv" >"$work/chunk0.csv"
{
	head -1 "$work/nci.csv"
	tail -n +20002 "$work/nci.csv"
} >"$work/chunk1.csv"

now() { date +%s.%N; }
# cpu_self PID: the seconds of CPU all of PID's threads used so far.
cpu_self() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.4f", s / 1e9}'; }
# switches PID: the context switches of all of PID's threads so far.
switches() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
# faults PID: its minor page faults so far.
faults() { awk '{sub(/.*\) /, ""); print $8}' /proc/"$1"/stat; }
# cpu_children PID: the CPU seconds of PID's children it waited for.
tck=$(getconf CLK_TCK)
cpu_children() { awk -v t="$tck" '{sub(/.*\) /, ""); printf "%.2f", ($14 + $15) / t}' /proc/"$1"/stat; }
# times_cpu FILE: the CPU of the children of each shell that ran `times`
# into FILE (its second line: children's user, then system), summed.
times_cpu() {
	awk 'NR % 2 == 0 {for (i = 1; i <= 2; i++) {split($i, a, /[ms]/); s += a[1] * 60 + a[2]}} END {printf "%.3f", s}' "$1"
}

run_scimesh() { # BINARY RUN: prints "worker_cpu super_cpu command_cpu task command_wall wall switches faults" per chunk
	local bin=$1 dir=$work/$2 url w
	mkdir -p "$dir"
	url=http://127.0.0.1:$(freeport)
	"$bin" serve --addr "${url#http://}" --db "sqlite:$dir/scimesh.db" --data-dir "$dir/data" --log-level warn 2>"$dir/serve.log" &
	pids+=($!)
	local serve=$!
	wait_ready "$url" "$serve" "$dir/serve.log" || return 1
	local workers=()
	for w in 1 2; do
		# The command as configured, then `times` for its CPU; its exit
		# status is kept.
		"$bin" worker --coordinator "$url" --token "$WORKER_AUTH_TOKEN" --id "bench-$w" --concurrency 1 \
			--work-dir "$dir/work-$w" \
			--workload "morgan=a=\$(date +%s.%N); PYTHONPATH=$PWD/python $python $PWD/examples/rdkit/score.py; s=\$?; times >>$dir/times-$w; echo \$a \$(date +%s.%N) >>$dir/walls-$w; exit \$s" \
			2>"$dir/worker-$w.log" &
		pids+=($!)
		workers+=($!)
	done
	# A job of 2 chunks of 100 rows first, so that what is measured is a
	# worker at work rather than one's first task (its first connections,
	# its heap growing, its buffers).
	SCIMESH_TOKEN=$CLIENT_AUTH_TOKEN "$bin" submit "$work/warm.csv" --coordinator "$url" --workload morgan \
		--param "query=$query" --top-k 20 --chunk-rows 100 --wait --output /dev/null 2>"$dir/warm.log"
	rm -f "$dir"/times-* "$dir"/walls-*
	sleep 1 # both in their next long poll
	local before=() cbefore=() sbefore=() fbefore=()
	for w in 0 1; do
		before[w]=$(cpu_self "${workers[w]}")
		cbefore[w]=$(cpu_children "${workers[w]}")
		sbefore[w]=$(switches "${workers[w]}")
		fbefore[w]=$(faults "${workers[w]}")
	done
	local t0 t1
	t0=$(now)
	SCIMESH_TOKEN=$CLIENT_AUTH_TOKEN "$bin" submit "$work/nci.csv" --coordinator "$url" --workload morgan \
		--param "query=$query" --top-k 20 --chunk-rows 20000 --wait --output "$dir/top20.csv" 2>"$dir/submit.log"
	t1=$(now)
	for w in 0 1; do
		local self children cmd
		self=$(awk -v a="${before[w]}" -v b="$(cpu_self "${workers[w]}")" 'BEGIN {printf "%.4f", b - a}')
		cmd=$(times_cpu "$dir/times-$((w + 1))")
		children=$(awk -v a="${cbefore[w]}" -v b="$(cpu_children "${workers[w]}")" -v c="$cmd" 'BEGIN {printf "%.3f", b - a - c}')
		echo "$self $children $cmd $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')" \
			$(($(switches "${workers[w]}") - sbefore[w])) $(($(faults "${workers[w]}") - fbefore[w])) \
			"$(grep 'msg="task completed"' "$dir/worker-$((w + 1)).log" | tail -1 | sed -E 's/.* duration=([0-9.]+)(m?s).*/\1 \2/' | awk '{printf "%.3f", $2 == "ms" ? $1 / 1000 : $1}')" \
			"$(awk '{printf "%.3f", $2 - $1}' "$dir/walls-$((w + 1))")"
		[ "$(wc -l <"$dir/times-$((w + 1))")" -eq 2 ] || { echo "worker bench-$((w + 1)) did not run exactly one chunk" >&2; exit 1; }
	done
	cmp -s "$dir/top20.csv" "$work/expected.csv" || { echo "$bin: the result differs from reference.py's" >&2; exit 1; }
	kill "${workers[@]}" "$serve"
	wait "${workers[@]}" "$serve" 2>/dev/null || true
	pids=()
	[ -n "${KEEP:-}" ] || rm -rf "$dir"
}

run_by_hand() { # RUN: prints "command_cpu wall" per chunk
	local dir=$work/$1 t0 t1 c
	mkdir -p "$dir"
	t0=$(now)
	for c in 0 1; do
		(
			a=$(now)
			SCIMESH_PARAMETERS="{\"query\":\"$query\"}" PYTHONPATH=python "$python" examples/rdkit/score.py <"$work/chunk$c.csv" >"$dir/out$c.csv" 2>"$dir/err$c"
			times >"$dir/times$c"
			awk -v a="$a" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}' >"$dir/wall$c"
		) &
	done
	wait
	t1=$(now)
	for c in 0 1; do echo "$(tail -1 "$dir/times$c" | awk '{for (i = 1; i <= 2; i++) {split($i, a, /[ms]/); s += a[1] * 60 + a[2]}} END {printf "%.3f", s}') $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') $(cat "$dir/wall$c")"; done
	rm -rf "$dir"
}

"$python" examples/rdkit/reference.py "$work/nci.csv" "$query" 20 >"$work/expected.csv"
echo "$(nproc) cores, $rows molecules in 2 chunks; $(uptime | sed 's/.*load average/load average/')"
declare -A samples
for round in $(seq "$rounds"); do
	# Odd rounds run the binaries in the order given, even rounds in the
	# reverse order, so that a load that rises or falls during a round
	# does not favour one.
	order=("${!bins[@]}")
	if ((round % 2 == 0)); then
		order=()
		for ((j = ${#bins[@]} - 1; j >= 0; j--)); do order+=("$j"); done
	fi
	for i in "${order[@]}"; do
		run_scimesh "${bins[i]}" "r$round-$i" >"$work/runs"
		while read -r self sup cmd wall sw pf task cwall; do
			echo "round $round, ${bins[i]}: worker_cpu $self s, super_cpu $sup s, command_cpu $cmd s, task $task s, command wall $cwall s, wall $wall s, switches $sw, faults $pf"
			samples[$i.extra]+="$(awk -v a="$task" -v b="$cwall" 'BEGIN {printf "%.3f", a - b}') "
			samples[$i.task]+="$task "
			samples[$i.sw]+="$sw "
			samples[$i.pf]+="$pf "
			samples[$i.self]+="$self "
			samples[$i.sup]+="$sup "
			samples[$i.cmd]+="$cmd "
			samples[$i.ratio]+="$(awk -v a="$self" -v b="$cmd" 'BEGIN {printf "%.4f", a / b}') "
			samples[$i.wall]+="$wall "
		done <"$work/runs"
	done
	run_by_hand "r$round-hand" >"$work/runs"
	while read -r cmd wall one; do
		echo "round $round, by hand: command_cpu $cmd s, command wall $one s, both wall $wall s"
		samples[hand.one]+="$one "
		samples[hand.cmd]+="$cmd "
		samples[hand.wall]+="$wall "
	done <"$work/runs"
done

echo "medians over $rounds rounds ($(uptime | sed 's/.*load average/load average/')):"
for i in "${!bins[@]}"; do
	echo "  ${bins[i]}: per chunk worker_cpu $(median "%.4g" <<<"${samples[$i.self]}") s," \
		"super_cpu $(median "%.4g" <<<"${samples[$i.sup]}") s, command_cpu $(median "%.4g" <<<"${samples[$i.cmd]}") s," \
		"worker/command $(awk -v r="$(median "%.4g" <<<"${samples[$i.ratio]}")" 'BEGIN {printf "%.1f%%", r * 100}');" \
		"task $(median "%.4g" <<<"${samples[$i.task]}") s, of which outside the command $(median "%.4g" <<<"${samples[$i.extra]}") s; submit --wait $(median "%.4g" <<<"${samples[$i.wall]}") s;" \
		"worker context switches $(median "%.4g" <<<"${samples[$i.sw]}"), minor faults $(median "%.4g" <<<"${samples[$i.pf]}")"
done
echo "  by hand: per chunk command_cpu $(median "%.4g" <<<"${samples[hand.cmd]}") s, command wall $(median "%.4g" <<<"${samples[hand.one]}") s; both in parallel $(median "%.4g" <<<"${samples[hand.wall]}") s"
