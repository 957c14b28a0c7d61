#!/usr/bin/env bash
# Uploads and chunk downloads with the tables in files under --data-dir
# beside an S3 bucket: a SeaweedFS `weed mini` the script starts on
# loopback (free ports, a temporary directory, keys of its own in
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for weed and serve alike).
# `scimesh serve` runs as a process of its own (SQLite, tokens), driven by
# bench/blobs (bin/blobs-bench), which reads serve's and weed's CPU time and
# serve's peak RSS (VmHWM) from /proc around what it times.
#
# Part "upload": a CSV table of SIZE bytes (generated once, in the page
# cache), each round once to files and once to S3 (the order alternating
# by round), each time on a fresh serve: POST /upload, then POST /jobs over
# it with CHUNK_ROWS rows a chunk (the chunking pass). Part "download": the
# table uploaded once to files and once to S3, then each round (the modes'
# order rotating) a job of DOWNLOAD_ROWS rows a chunk on a fresh serve of
# each mode — files, S3 through the coordinator, S3 with --presign — its
# chunks claimed with POST /tasks/claim and downloaded as a worker does
# (input.url with the worker token; signed: the URL with input.range,
# input.header_line first), CONCURRENCY at a time, sha256 checked.
# Usage: bench/blobs.sh [ROUNDS]   (default 3; prints every run, then medians)
# SIZE (1000000000), CHUNK_ROWS (10000), DOWNLOAD_ROWS (50000, about 14 MB
# a chunk), CONCURRENCY (1), PARTS ("upload download") change what is run;
# WEED names the weed binary (default /var/cache/scimesh/weed, else weed on
# PATH). PROFILE=DIR also takes CPU profiles of serve (--pprof) and weed
# (-debug) during one more upload of each store after the rounds and one
# more download of each S3 mode, over the downloads alone (DIR/PART-MODE-serve.pprof, …-weed.pprof and
# their .top, `go tool pprof -top`), PROFILE_SECONDS (4) long.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
size=${SIZE:-1000000000}
chunk_rows=${CHUNK_ROWS:-10000}
download_rows=${DOWNLOAD_ROWS:-50000}
concurrency=${CONCURRENCY:-1}
parts=${PARTS:-upload download}
profile=${PROFILE:-}
weed_bin=${WEED:-/var/cache/scimesh/weed}
[ -x "$weed_bin" ] || weed_bin=$(command -v weed) || { echo "no weed binary: build one with tools/weed.sh" >&2; exit 1; }

go build -o bin/scimesh ./cmd/scimesh
go build -o bin/blobs-bench ./bench/blobs

. bench/lib.sh
bench_tokens
AWS_ACCESS_KEY_ID=scimesh-bench
AWS_SECRET_ACCESS_KEY=$(openssl rand -hex 16)
AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION

work=$(mktemp -d)
weed=
server=
cleanup() {
	local pid
	for pid in $server $weed; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

# weed_ports prints 6 loopback ports, each free with the one 10000 above
# it (each of weed's servers also listens there, for gRPC).
weed_ports() {
	python3 - <<'PY'
import socket
held, ports = [], []
while len(ports) < 6:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    held.append(a)
    if p + 10000 > 65535:
        continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 10000))
    except OSError:
        continue
    held.append(b)
    ports.append(p)
print(*ports)
PY
}

read -r s3port p1 p2 p3 p4 p5 < <(weed_ports)
endpoint=http://127.0.0.1:$s3port
mkdir -p "$work/weed/data"
weed_debug=()
[ -z "$profile" ] || { mkdir -p "$profile"; weed_debug=(-debug); }
(cd "$work/weed" && exec "$weed_bin" mini -dir="$work/weed/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
	-s3.port="$s3port" -master.port="$p1" -volume.port="$p2" -filer.port="$p3" \
	-admin.port="$p4" -debug.port="$p5" -admin.port.legacy=0 -s3.port.iceberg=0 \
	-s3.port.lance=0 -webdav=false "${weed_debug[@]}" >"$work/weed.log" 2>&1) &
weed=$!
for i in $(seq 450); do
	bin/blobs-bench bucket -endpoint "$endpoint" probe 2>/dev/null && break
	kill -0 "$weed" 2>/dev/null || { tail -50 "$work/weed.log" >&2; echo "weed mini ended before it served S3" >&2; exit 1; }
	[ "$i" -lt 450 ] || { tail -50 "$work/weed.log" >&2; echo "weed mini did not serve S3 within 90 s" >&2; exit 1; }
	sleep 0.2
done

# serve_start DIR BLOBS [ARGS…] starts serve on DIR (its data dir and
# SQLite file) with --blobs BLOBS and waits until it is ready; $url is its
# URL, $server its PID.
serve_start() {
	local dir=$1 blobs=$2
	shift 2
	mkdir -p "$dir"
	url=http://127.0.0.1:$(freeport)
	# warn: info would log a line per request, which costs the server.
	bin/scimesh serve --addr "${url#http://}" --data-dir "$dir" --db "sqlite:$dir/scimesh.db" \
		--blobs "$blobs" --log-level warn "$@" 2>"$work/serve.log" &
	server=$!
	wait_ready "$url" "$server" "$work/serve.log" || exit 1
}


bucket_seq=0
# new_bucket creates a new, empty bucket; $blobs is its --blobs URL.
new_bucket() {
	bucket_seq=$((bucket_seq + 1))
	bin/blobs-bench bucket -endpoint "$endpoint" "bench-$bucket_seq"
	blobs="s3://bench-$bucket_seq?endpoint=$endpoint&region=us-east-1"
}

# kv KEY LINE prints KEY's value in a line of KEY=VALUE pairs.
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }


# profile_start NAME starts CPU profiles of serve and weed, in the
# background, PROFILE_SECONDS long; profile_end waits for them.
profs=()
profile_start() {
	local secs=${PROFILE_SECONDS:-4}
	curl -fs -o "$profile/$1-serve.pprof" "http://$pprof/debug/pprof/profile?seconds=$secs" &
	profs=($!)
	curl -fs -o "$profile/$1-weed.pprof" "http://127.0.0.1:$p5/debug/pprof/profile?seconds=$secs" &
	profs+=($!)
	prof_name=$1
}
profile_end() {
	wait "${profs[@]}"
	profile_tops
}
# profile_tops writes the .top of $prof_name's profiles.
profile_tops() {
	local who
	for who in serve weed; do
		go tool pprof -top "$profile/$prof_name-$who.pprof" >"$profile/$prof_name-$who.top" 2>/dev/null
	done
}

table=$work/table.csv
bin/blobs-bench table -size "$size" "$table"
cat "$table" >/dev/null
echo "$(nproc) cores, $(load); table $(stat -c %s "$table") bytes, $(($(wc -l <"$table") - 1)) rows; weed $("$weed_bin" version 2>/dev/null | head -1)"

declare -A v
# keep NAME KEY… appends each KEY's value in $line to v[NAME.KEY].
keep() {
	local name=$1 key
	shift
	for key in "$@"; do v[$name.$key]+="$(kv "$key" "$line") "; done
}
med() { median "${2:-%.0f}" <<<"${v[$1]:-}"; }

# upload_run MODE [ARGS…]: one upload and chunking on a fresh serve; the
# line bench/blobs printed is in $line.
upload_run() {
	local mode=$1 blobs=
	shift
	[ "$mode" = files ] || new_bucket
	serve_start "$work/up" "$blobs" "$@"
	line=$(bin/blobs-bench upload -coordinator "$url" -file "$table" -chunk-rows "$chunk_rows" -pid "$server,$weed")
	serve_stop
	rm -rf "$work/up"
}

if [[ " $parts " == *" upload "* ]]; then
	for round in $(seq "$rounds"); do
		modes="files s3"
		[ $((round % 2)) = 1 ] || modes="s3 files"
		for mode in $modes; do
			upload_run "$mode"
			echo "upload, $mode, round $round: $line ($(load))"
			keep "up.$mode" upload_s upload_mbs chunk_s chunk_mbs hwm_start_mib hwm_upload_mib hwm_chunk_mib \
				upload_cpu0_s upload_cpu1_s chunk_cpu0_s chunk_cpu1_s
		done
	done
	echo "upload medians over $rounds rounds ($(load)):"
	for mode in files s3; do
		echo "  $mode: POST /upload $(med "up.$mode.upload_s" %.2f) s, $(med "up.$mode.upload_mbs") MB/s" \
			"(serve CPU $(med "up.$mode.upload_cpu0_s" %.2f) s, weed $(med "up.$mode.upload_cpu1_s" %.2f) s);" \
			"POST /jobs $(med "up.$mode.chunk_s" %.2f) s, $(med "up.$mode.chunk_mbs") MB/s" \
			"(serve CPU $(med "up.$mode.chunk_cpu0_s" %.2f) s, weed $(med "up.$mode.chunk_cpu1_s" %.2f) s);" \
			"serve VmHWM $(med "up.$mode.hwm_start_mib") MiB at start, $(med "up.$mode.hwm_upload_mib") after the upload, $(med "up.$mode.hwm_chunk_mib") after the job"
	done
	if [ -n "$profile" ]; then
		for mode in s3 files; do
			pprof=127.0.0.1:$(freeport)
			blobs=
			[ "$mode" = files ] || new_bucket
			serve_start "$work/up" "$blobs" --pprof "$pprof"
			profile_start "upload-$mode"
			line=$(bin/blobs-bench upload -coordinator "$url" -file "$table" -chunk-rows "$chunk_rows" -pid "$server,$weed")
			profile_end
			serve_stop
			rm -rf "$work/up"
			echo "upload, $mode, profiled: $line"
		done
	fi
fi

if [[ " $parts " == *" download "* ]]; then
	new_bucket
	s3blobs=$blobs
	serve_start "$work/dl-files" ""
	files_upload=$(kv upload_id "$(bin/blobs-bench upload -coordinator "$url" -file "$table" -chunk-rows "$download_rows")")
	serve_stop
	serve_start "$work/dl-s3" "$s3blobs"
	s3_upload=$(kv upload_id "$(bin/blobs-bench upload -coordinator "$url" -file "$table" -chunk-rows "$download_rows")")
	serve_stop
	# The table is in both stores now: what is read is theirs.
	# download_run MODE [ARGS…]: one job's downloads on a fresh serve;
	# the line bench/blobs printed is in $line.
	download_run() {
		local mode=$1 up
		shift
		case $mode in
		files) serve_start "$work/dl-files" "" "$@" && up=$files_upload ;;
		s3) serve_start "$work/dl-s3" "$s3blobs" "$@" && up=$s3_upload ;;
		presign) serve_start "$work/dl-s3" "$s3blobs" --presign "$@" && up=$s3_upload ;;
		esac
		local prof=()
		if [ -n "$profiling" ]; then
			# Fetched by bench/blobs as its downloads start, after the job's
			# creation (which reads the whole upload).
			prof_name=download-$mode
			prof=(-profile "$profile/$prof_name-serve.pprof=http://$pprof/debug/pprof/profile?seconds=${PROFILE_SECONDS:-4}"
				-profile "$profile/$prof_name-weed.pprof=http://127.0.0.1:$p5/debug/pprof/profile?seconds=${PROFILE_SECONDS:-4}")
		fi
		line=$(bin/blobs-bench download -coordinator "$url" -upload "$up" -chunk-rows "$download_rows" -concurrency "$concurrency" -pid "$server,$weed" "${prof[@]}")
		[ -z "$profiling" ] || profile_tops
		serve_stop
	}
	profiling=
	all="files s3 presign"
	for round in $(seq "$rounds"); do
		for mode in $all; do
			download_run "$mode"
			echo "download, $mode, round $round: $line ($(load))"
			keep "dl.$mode" chunks bytes wall_s total_mbs per_download_mbs download_cpu0_s download_cpu1_s
		done
		all="${all#* } ${all%% *}"
	done
	if [ -n "$profile" ]; then
		profiling=1
		for mode in s3 presign; do
			pprof=127.0.0.1:$(freeport)
			download_run "$mode" --pprof "$pprof"
			echo "download, $mode, profiled: $line"
		done
	fi
	echo "download medians over $rounds rounds, $concurrency at a time ($(load)):"
	for mode in files s3 presign; do
		echo "  $mode: $(med "dl.$mode.chunks") chunks of about $(($(med "dl.$mode.bytes") / $(med "dl.$mode.chunks") / 1000000)) MB," \
			"$(med "dl.$mode.wall_s" %.2f) s, $(med "dl.$mode.total_mbs") MB/s in total, $(med "dl.$mode.per_download_mbs") MB/s per download;" \
			"serve CPU $(med "dl.$mode.download_cpu0_s" %.2f) s, weed CPU $(med "dl.$mode.download_cpu1_s" %.2f) s"
	done
fi
