#!/usr/bin/env bash
# `make bench`: vyrefs measured side by side with its baselines in one run.
#   targets   vyrefs (BENCH_BACKEND), the null FUSE fs (bench/nullfs.c, same
#             libfuse settings), tmpfs; raw driver figures (bench/cudaraw.c)
#   output    bench/out/results.txt (`key value`), raw logs beside it, then
#             bench/report.py writes bench/out/BENCHMARKS.md and the plot.
# BENCH_BACKEND=cuda|host (default: cuda when nvidia-smi sees a GPU).
# BENCH_QUICK=1 shrinks every size for a smoke check (any backend).
# BENCH_PHASES=dd,fio,...: only these (raw state dd fio rand ctl std map ingest cp handles churn survive steady
# takeover grow loop devices), adding to results.txt; the report covers whatever it holds. The
# default is all of them, with devices (one mount over two GPUs) only where
# nvidia-smi lists two or more; on the host backend devices is a smoke check
# over two host devices (host_devices=2). attach (a 7B-shaped model to its first
# answer, bench/attach_bench.py: torch and transformers, cuda) and exact (an
# attached model's forward passes against transformers' own load,
# bench/exact_bench.py) and families (a converted model's attaches against
# transformers' load, bench/families_bench.py) and ranks (two tensor-parallel
# ranks restarted onto their resident shards, bench/ranks_bench.py: on GPUs
# 0 and 1, or where one GPU is listed both on it, a stand-in) run only when
# named; so does tier (a mount over a directory against fio, transformers
# and vyrefs cp, bench/tier_bench.py).
# BENCH_REPS=N: single-stream reads (dd, fio 1 job) run N times, each after
# dropping caches; the figure is their median (default 3).
# TMPDIR: where the mount points go (default /tmp).
# BENCH_OPTS=key=value,...: more -o options for every vyrefs and null fs mount
# BENCH_VYREFS_OPTS=key=value,...: more -o options for vyrefs mounts only
#   (survive=on: the dd/fio/ctl figures with the state kept)
# (keys both take, e.g. idle_threads=4), to measure a setting on both.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD=${BUILD:-build}
BIN=$BUILD/bench
OUT=${BENCH_OUT:-bench/out}
BACKEND=${BENCH_BACKEND:-$(nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo host)}
QUICK=${BENCH_QUICK:-0}
FIO=${FIO:-$(command -v fio || echo .device/tools/fio)}
RES=$OUT/results.txt
# How many GPUs nvidia-smi lists (0 without it).
gpu_count() { nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true; }
DEFAULT_PHASES=raw,state,dd,fio,rand,ctl,std,map,ingest,cp,handles,churn,grow,loop,survive,steady,takeover
if [ "$(gpu_count)" -ge 2 ]; then DEFAULT_PHASES+=,devices; fi
PHASES=${BENCH_PHASES:-$DEFAULT_PHASES}
REPS=${BENCH_REPS:-3}
mkdir -p "$OUT"
[ -n "${BENCH_PHASES:-}" ] || { : >"$RES"; : >"$OUT/log.txt"; }
touch "$RES" # named phases add to it; a fresh BENCH_OUT has none yet
has() { [[ ",$PHASES," == *",$1,"* ]]; }

if [ "$QUICK" = 1 ]; then
	SEQ=$((64 << 20)) PAR=$((16 << 20)) RAND=$((64 << 20)) RUNTIME=1 N=200 CP=$((64 << 20)) PEER=$((64 << 20))
else
	SEQ=$((4 << 30)) PAR=$((1 << 30)) RAND=$((1 << 30)) RUNTIME=4 N=5000 CP=$((1 << 30)) PEER=$((4 << 30))
fi
BLOCKS="4K 16K 64K 256K 1M 4M"

put() { echo "$1 $2" | tee -a "$RES"; }
log() { echo "== $*" >>"$OUT/log.txt"; }
bytes_of() { numfmt --from=iec "$1"; }
gbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.3f", b / s / 1e9 }'; }
# dd_gbps BYTES DD-ARGS...: run dd (logged), print GB/s from its seconds.
dd_gbps() {
	local bytes=$1 out
	shift
	out=$(dd "$@" 2>&1 | tee -a "$OUT/log.txt" | tail -1)
	gbps "$bytes" "$(echo "$out" | awk -F, '{ print $3 }' | awk '{ print $1 }')"
}
# median V...: the middle value (the upper one of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int(NR / 2) + 1] }'; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
# median_read KEY LABEL CMD...: CMD (which prints one figure) REPS times, each
# after dropping caches; every sample logged under LABEL, the median put
# under KEY.
median_read() {
	local key=$1 label=$2 rep reads=()
	shift 2
	for rep in $(seq "$REPS"); do
		drop_caches
		reads+=("$("$@")")
	done
	log "$label: ${reads[*]}"
	put "$key" "$(median "${reads[@]}")"
}

ROOT=$(mktemp -d -p "${TMPDIR:-/tmp}" vybench.XXXXXX) # mount points
declare -A MNT PID
cleanup() {
	for t in "${!MNT[@]}"; do
		mountpoint -q "${MNT[$t]}" && { fusermount3 -u "${MNT[$t]}" 2>/dev/null || umount "${MNT[$t]}"; }
	done
	for p in "${PID[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$ROOT"
}
trap cleanup EXIT

wait_mounted() {
	for _ in $(seq 200); do
		mountpoint -q "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	echo "bench: $1 did not mount; see $OUT/log.txt" >&2
	return 1
}

# mount_target NAME [-o options]
mount_target() {
	local t=$1 m=$ROOT/$1 o=${BENCH_OPTS:-}
	[ -n "${2:-}" ] && o=${o:+$o,}$2
	mkdir -p "$m"
	case $t in
	tmpfs) mount -t tmpfs -o size=80% tmpfs "$m" ;;
	nullfs*)
		env --default-signal=INT "$BIN/nullfs" "$m" ${o:+-o "$o"} >>"$OUT/log.txt" 2>&1 &
		PID[$t]=$!
		wait_mounted "$m" "${PID[$t]}"
		;;
	*)
		o=${BENCH_VYREFS_OPTS:+$BENCH_VYREFS_OPTS${o:+,}}$o
		env --default-signal=INT "$BUILD/vyrefs" -f -o "backend=${TBACKEND:-$BACKEND}${o:+,$o}" "$m" >>"$OUT/log.txt" 2>&1 &
		PID[$t]=$!
		wait_mounted "$m" "${PID[$t]}"
		;;
	esac
	MNT[$t]=$m
}

unmount_target() {
	local t=$1
	umount "${MNT[$t]}"
	[ -n "${PID[$t]:-}" ] && { wait "${PID[$t]}" || { echo "bench: $t exited non-zero" >&2; return 1; }; }
	unset "MNT[$t]" "PID[$t]"
}

meta() {
	put meta.date "$(date -u +%Y-%m-%dT%H:%MZ)"
	put meta.commit "${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)}"
	put meta.backend "$BACKEND"
	put meta.quick "$QUICK"
	put meta.kernel "$(uname -r)"
	put meta.cpu "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo) x$(nproc)"
	if [ "$BACKEND" = cuda ]; then
		put meta.gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
		put meta.driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
	fi
	put meta.fio "$("$FIO" --version 2>/dev/null || echo none)"
	put meta.opts "${BENCH_OPTS:-none}"
	put meta.vyrefs_opts "${BENCH_VYREFS_OPTS:-none}"
	put meta.reps "$REPS"
}

# dd_write_read WKEY RKEY FILE BYTES BS: write FILE (with a final fsync),
# then read it REPS times, each after dropping caches; GB/s under
# dd.WKEY.write.BS and dd.RKEY.read.BS (the median read).
dd_write_read() {
	local wkey=$1 rkey=$2 f=$3 bytes=$4 bs=$5 n
	n=$((bytes / $(bytes_of "$bs")))
	log "dd $wkey write bs=$bs"
	put "dd.$wkey.write.$bs" "$(dd_gbps "$bytes" if=/dev/zero of="$f" bs="$bs" count="$n" conv=fsync)"
	median_read "dd.$rkey.read.$bs" "dd $rkey read bs=$bs" dd_gbps "$bytes" if="$f" of=/dev/null bs="$bs"
	rm -f "$f"
}

# Each block size on every target in turn, so a drift of the machine
# meets vyrefs and its baselines alike.
seq_dd() {
	local bs t
	for bs in $BLOCKS; do
		for t in "$@"; do dd_write_read "$t" "$t" "${MNT[$t]}/seq" "$SEQ" "$bs"; done
	done
}

# fio JSON -> figures, through a small python reader.
fio_json() { python3 bench/fio_figures.py "$@"; }

fio_run() { # NAME ARGS...: run fio, keep its JSON under OUT
	local name=$1
	shift
	log "fio $name $*"
	"$FIO" --output-format=json --output="$OUT/fio-$name.json" --fallocate=none "$@" >>"$OUT/log.txt" 2>&1
}
fio_figure() { # NAME RW WHAT ARGS...: fio_run NAME ARGS, then print its RW figure WHAT (fio_figures.py)
	local name=$1 rw=$2 what=$3
	shift 3
	fio_run "$name" "$@" && fio_json "$OUT/fio-$name.json" "$rw" "$what"
}
fio_gbps() { fio_figure "$1" "$2" gbps "${@:3}"; } # NAME RW ARGS...: its RW GB/s

seq_fio() {
	local t=$1 d=${MNT[$1]} rw
	fio_run "$t-seq-write" --name=seq --directory="$d" --rw=write --bs=1M --size=$SEQ --ioengine=psync --end_fsync=1
	put "fio.$t.seq.write" "$(fio_json "$OUT/fio-$t-seq-write.json" write gbps)"
	median_read "fio.$t.seq.read" "fio $t seq read" fio_gbps "$t-seq-read" read --name=seq --directory="$d" \
		--rw=read --bs=1M --size=$SEQ --ioengine=psync
	for rw in write read; do
		[ $rw = read ] && drop_caches
		fio_run "$t-par8-$rw" --name=par --directory="$d" --rw=$rw --bs=1M --size=$PAR --numjobs=8 \
			--ioengine=psync --end_fsync=1 --group_reporting
		put "fio.$t.par8.$rw" "$(fio_json "$OUT/fio-$t-par8-$rw.json" $rw gbps)"
	done
	rm -f "$d"/seq.* "$d"/par.*
}

rand_fio() { # TARGET [IODEPTHS [JOBS]]
	local t=$1 f=${MNT[$1]}/rand qd j
	fio_run "$t-rand-layout" --name=layout --filename="$f" --rw=write --bs=1M --size=$RAND --ioengine=psync
	for qd in ${2:-1 32}; do
		for j in ${3:-1 4}; do
			if fio_run "$t-rand-qd$qd-j$j" --name=rand --filename="$f" --rw=randread --bs=4k --size=$RAND \
				--direct=1 --ioengine=io_uring --iodepth=$qd --numjobs=$j --group_reporting \
				--time_based --runtime=$RUNTIME; then
				for k in iops p50_us p99_us; do
					put "fio.$t.rand.qd$qd.j$j.$k" "$(fio_json "$OUT/fio-$t-rand-qd$qd-j$j.json" read $k)"
				done
			else
				put "fio.$t.rand.qd$qd.j$j.iops" "n/a"
			fi
		done
	done
	rm -f "$f"
}

# A handle's whole life on each target: open+close of a 4 KiB file, and
# opendir+readdir+closedir of 100 entries (µs, medians); vyrefs against
# the null FUSE fs as ratios.
handle_figures() {
	local t
	for t in vyrefs nullfs tmpfs; do
		mkdir -p "${MNT[$t]}/handles"
		for i in $(seq 100); do : >"${MNT[$t]}/handles/f$i"; done
		put "handles.$t.open_us" "$("$BIN/vybench" opens "${MNT[$t]}/handles/f1" $((N * 4)))"
		put "handles.$t.readdir_us" "$("$BIN/vybench" readdir "${MNT[$t]}/handles" "$N")"
		rm -rf "${MNT[$t]}/handles"
	done
	put handles.open_over_nullfs "$(ratio_of "$(last_of handles.vyrefs.open_us)" "$(last_of handles.nullfs.open_us)")"
	put handles.readdir_over_nullfs "$(ratio_of "$(last_of handles.vyrefs.readdir_us)" "$(last_of handles.nullfs.readdir_us)")"
}

# 1 MiB + 4 KiB: a buffer the pool takes on every backend and setting (on
# cuda with survive=on, 1 MiB or less is a slab slot, never pooled; a file
# of 2 MiB made by ftruncate is a hole, no memory at all).
churn() { # TARGET [KEY]
	local t=$1 key=${2:-$1}
	put "churn.$key.ops" "$("$BIN/vybench" churn "${MNT[$t]}" $((N * 4)) 1052672)"
}

# Appending 4 KiB writes to one file until a 256 MiB budget is full, on
# this run's backend, the host backend and tmpfs: µs per MiB of the last
# tenth against the first (a file that moved to grow slowed down as it
# neared the end; one that grows in place does not).
grow_figures() {
	local b t line
	for b in $(printf '%s\n' "$BACKEND" host | sort -u) tmpfs; do
		t=grow_$b
		case $b in
		cuda) TBACKEND=cuda mount_target "$t" resident_budget=256M ;;
		host) TBACKEND=host mount_target "$t" host_memory=256M ;;
		tmpfs) mkdir -p "$ROOT/$t" && mount -t tmpfs -o size=256M tmpfs "$ROOT/$t" && MNT[$t]=$ROOT/$t ;;
		esac
		line=$("$BIN/vybench" append "${MNT[$t]}/append" 4096)
		put "grow.$b.bytes" "$(echo "$line" | awk '{ print $1 }')"
		put "grow.$b.first_us_per_mib" "$(echo "$line" | awk '{ print $2 }')"
		put "grow.$b.last_us_per_mib" "$(echo "$line" | awk '{ print $3 }')"
		if [ "$b" != tmpfs ]; then
			put "grow.$b.d2d_bytes" "$(stat_of "$t" d2d_bytes)"
			put "grow.$b.grows" "$(stat_of "$t" grows)"
		fi
		unmount_target "$t"
	done
}

copy_in_mount() {
	local t=$1 d=${MNT[$1]} t0 t1
	dd if=/dev/zero of="$d/cp-src" bs=1M count=$((CP >> 20)) conv=fsync status=none
	t0=$(date +%s%N)
	cp "$d/cp-src" "$d/cp-dst"
	t1=$(date +%s%N)
	cmp -s "$d/cp-src" "$d/cp-dst" || { echo "bench: cp in $t made a different file" >&2; return 1; }
	put "cp.$t.gbps" "$(gbps "$CP" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')")"
	rm -f "$d/cp-src" "$d/cp-dst"
}

# The same dd writes with write-behind off, and reads with readahead off:
# their effect, measured (on a quarter of the size).
features_off_ab() {
	local bs
	for bs in 4K 1M; do dd_write_read vyrefs_nowb vyrefs_nora "${MNT[vyrefs]}/ab" $((SEQ / 4)) "$bs"; done
}

stat_of() { awk -v k="$2" '$1 == k { print $2 }' "${MNT[$1]}/.vyre/stats"; }

ctl_figures() {
	local m=${MNT[vyrefs]} ctl=${MNT[vyrefs]}/.vyre/ctl
	put "rtt.nullfs_us" "$("$BIN/vybench" rtt "${MNT[nullfs]}/rtt" $((N * 4)))"
	put "rtt.vyrefs_us" "$("$BIN/vybench" rtt "$m/rtt" $((N * 4)))"
	rm -f "${MNT[nullfs]}/rtt" "$m/rtt"
	if [ "$BACKEND" != cuda ]; then
		log "ctl launches need the cuda backend: skipped"
	else
		# The launch baselines again, right beside: they drift over a run.
		"$BIN/cudaraw" bench/noop.ptx launch | sed 's/^raw\./ctl.beside_/' | tee -a "$RES"
		cp bench/noop.ptx "$m/.vyre/modules/noop.ptx"
		put ctl.launch_us "$("$BIN/vybench" ctlw "$ctl" "$N" $'launch noop.noop grid=1 block=1\n')"
		put ctl.launch_read_us "$("$BIN/vybench" ctl "$ctl" "$N" $'launch noop.noop grid=1 block=1\n')"
		local rep
		rep=$("$BIN/vybench" ctl "$ctl" 50 $'repeat 1000\nlaunch noop.noop grid=1 block=1\nend\n')
		put ctl.repeat1000_step_us "$(awk -v u="$rep" 'BEGIN { printf "%.3f", u / 1000 }')"
		rm "$m/.vyre/modules/noop.ptx"
		# The first sequence that names a new 1 GiB file exports it and
		# the launcher imports and maps it; later ones find it mapped.
		fallocate -l 1G "$m/touch" # memory now, not holes: this times the mapping alone
		put ctl.first_touch_1g_us "$("$BIN/vybench" ctlw "$ctl" 1 $'fill touch 0 0 1\n')"
		put ctl.touch_1g_us "$("$BIN/vybench" ctlw "$ctl" "$N" $'fill touch 0 0 1\n')"
		rm "$m/touch"
		# The launcher's channel as a plain socket (VY_CHANNEL=socket)
		# instead of the shared mailbox: the measurement that chose it.
		VY_CHANNEL=socket mount_target vyrefs_sock
		cp bench/noop.ptx "${MNT[vyrefs_sock]}/.vyre/modules/noop.ptx"
		put ctl.launch_socket_us "$("$BIN/vybench" ctlw "${MNT[vyrefs_sock]}/.vyre/ctl" "$N" $'launch noop.noop grid=1 block=1\n')"
		rep=$("$BIN/vybench" ctl "${MNT[vyrefs_sock]}/.vyre/ctl" 50 $'repeat 1000\nlaunch noop.noop grid=1 block=1\nend\n')
		put ctl.repeat1000_socket_step_us "$(awk -v u="$rep" 'BEGIN { printf "%.3f", u / 1000 }')"
		unmount_target vyrefs_sock
		# The same launches in the daemon's own context (VY_NO_SHARE=1:
		# no shareable memory, so no launcher), as the first milestone ran
		# them: what the process boundary costs.
		BENCH_VYREFS_OPTS= VY_NO_SHARE=1 mount_target vyrefs_inproc # no VMM: nothing a keeper could hold
		local mi=${MNT[vyrefs_inproc]}
		cp bench/noop.ptx "$mi/.vyre/modules/noop.ptx"
		put ctl.launch_inproc_us "$("$BIN/vybench" ctlw "$mi/.vyre/ctl" "$N" $'launch noop.noop grid=1 block=1\n')"
		rep=$("$BIN/vybench" ctl "$mi/.vyre/ctl" 50 $'repeat 1000\nlaunch noop.noop grid=1 block=1\nend\n')
		put ctl.repeat1000_inproc_step_us "$(awk -v u="$rep" 'BEGIN { printf "%.3f", u / 1000 }')"
		unmount_target vyrefs_inproc
	fi
	truncate -s $((CP)) "$m/fill"
	local us
	us=$("$BIN/vybench" ctl "$ctl" 10 $'fill fill 7\n')
	put ctl.fill_gbps "$(awk -v b="$CP" -v u="$us" 'BEGIN { printf "%.1f", b / u / 1e3 }')"
	rm "$m/fill"
}

# ms_of CMD...: wall milliseconds of one run of CMD (which must succeed).
ms_of() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null || { echo "bench: $* failed" >&2; return 1; }
	t1=$(date +%s%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'
}

# device_us CTL TEXT: the device time the reply to one sequence gives.
device_us() {
	python3 - "$1" "$2" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, sys.argv[2].encode())
reply = os.read(fd, 4096).decode()
os.close(fd)
if not reply.startswith("ok"):
    sys.exit("bench: the sequence failed: " + reply)
print(dict(kv.split("=") for kv in reply.split()[1:])["device_us"])
PY
}

# CUDA C source (NVRTC) and the std module, on a mount with a cache of its
# own: compiling and loading a small .cu the first time and from the cache,
# std's first launch, and std.sum_f32 over 1 GiB against a device-to-device
# copy of the same bytes (reads and writes counted), both by device time.
std_figures() {
	if [ "$BACKEND" != cuda ]; then
		log "std figures need the cuda backend: skipped"
		return 0
	fi
	XDG_CACHE_HOME=$ROOT/stdcache mount_target vyrefs_std
	local m=${MNT[vyrefs_std]} ctl=${MNT[vyrefs_std]}/.vyre/ctl bytes n reps=20 us
	# Unique to this run, so no cache holds it.
	printf '// bench %s\nextern "C" __global__ void axpy(float *y, const float *x, float a, unsigned long long n)\n{\n\tunsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n\tif (i < n)\n\t\ty[i] = a * x[i] + y[i];\n}\n' \
		"$(date +%s%N)" >"$ROOT/small.cu"
	put std.cu_first_ms "$(ms_of cp "$ROOT/small.cu" "$m/.vyre/modules/small.cu")"
	put std.cu_cached_ms "$(ms_of cp "$ROOT/small.cu" "$m/.vyre/modules/again.cu")"
	truncate -s 4096 "$m/one"
	put std.first_launch_ms "$(ms_of "$BIN/vybench" ctlw "$ctl" 1 $'launch std.fill_f32 n=1024 one f32:1 u64:1024\n')"
	put std.launch_ms "$(ms_of "$BIN/vybench" ctlw "$ctl" 1 $'launch std.fill_f32 n=1024 one f32:1 u64:1024\n')"
	put std.compiles "$(stat_of vyrefs_std compiles)"
	bytes=$((QUICK == 1 ? 64 << 20 : 1 << 30))
	n=$((bytes / 4))
	truncate -s "$bytes" "$m/x"
	truncate -s "$bytes" "$m/x2"
	truncate -s 8 "$m/out"
	# Values, and every file mapped into the launcher before timing.
	device_us "$ctl" "launch std.iota_f32 n=$n x f32:0 f32:1 u64:$n
copy x x2
launch std.sum_f32 n=$n grid=auto out x u64:$n
" >/dev/null
	us=$(device_us "$ctl" "repeat $reps
launch std.sum_f32 n=$n grid=auto out x u64:$n
end
")
	put std.sum_1g_gbps "$(awk -v b="$bytes" -v r="$reps" -v u="$us" 'BEGIN { printf "%.1f", b * r / u / 1e3 }')"
	us=$(device_us "$ctl" "repeat $reps
launch std.sum_f32 n=$n out x u64:$n
end
")
	put std.sum_1g_thread_each_gbps "$(awk -v b="$bytes" -v r="$reps" -v u="$us" 'BEGIN { printf "%.1f", b * r / u / 1e3 }')"
	us=$(device_us "$ctl" "repeat $reps
copy x x2
end
")
	put std.copy_1g_gbps "$(awk -v b="$bytes" -v r="$reps" -v u="$us" 'BEGIN { printf "%.1f", 2 * b * r / u / 1e3 }')"
	unmount_target vyrefs_std
}

# Both filesystems on each request loop: ours (the default) and libfuse's
# (idle_threads=0), each on a fresh mount, in the same order, measured after
# a busy spell (8 parallel writers, then readers): one-at-a-time 4 KiB reads
# and launches, and the parallel figures (daemon/session.h says why the loops
# differ).
loops_ab() {
	local t d loop
	for t in nullfs_ours nullfs_libfuse vyrefs_ours vyrefs_libfuse; do
		loop=${t#*_}
		if [ "$loop" = libfuse ]; then mount_target "$t" idle_threads=0; else mount_target "$t"; fi
		d=${MNT[$t]}
		fio_run "$t-par8-write" --name=par --directory="$d" --rw=write --bs=1M --size=$PAR --numjobs=8 \
			--ioengine=psync --end_fsync=1 --group_reporting
		put "fio.$t.par8.write" "$(fio_json "$OUT/fio-$t-par8-write.json" write gbps)"
		drop_caches
		fio_run "$t-par8-read" --name=par --directory="$d" --rw=read --bs=1M --size=$PAR --numjobs=8 \
			--ioengine=psync --group_reporting
		put "fio.$t.par8.read" "$(fio_json "$OUT/fio-$t-par8-read.json" read gbps)"
		rm -f "$d"/par.*
		rand_fio "$t"
		put "rtt.${t}_us" "$("$BIN/vybench" rtt "$d/rtt" $((N * 4)))"
		if [[ $t == vyrefs_* ]] && [ "$BACKEND" = cuda ]; then
			cp bench/noop.ptx "$d/.vyre/modules/noop.ptx"
			put "ctl.launch_${loop}_us" "$("$BIN/vybench" ctlw "$d/.vyre/ctl" "$N" $'launch noop.noop grid=1 block=1\n')"
		fi
		unmount_target "$t"
	done
}

# The ranks phase: bench/ranks_bench.py over a mount of GPUs 0 and 1, each
# rank on its own (NCCL); where nvidia-smi lists one GPU, both ranks on it
# with gloo (NCCL refuses two ranks on one GPU): a stand-in, said so in
# ranks.gpus, whose figures compare only with each other.
ranks_figures() {
	if [ "$BACKEND" != cuda ] || ! python3 -c 'import torch' 2>/dev/null; then
		log "ranks figures need the cuda backend and torch: skipped"
		return 0
	fi
	local gpus=2 opts=devices=0,1
	if [ "$(gpu_count)" -lt 2 ]; then
		gpus=1 opts=""
		log "ranks: one GPU: both ranks on it (gloo), a stand-in for two"
	fi
	mount_target ranks "$opts"
	VYREFS_LIB=$PWD/$BUILD/libvyrefs.so PYTHONPATH=$PWD/client/python \
		python3 bench/ranks_bench.py "${MNT[ranks]}" "${BENCH_REPS:-5}" "$gpus" | tee -a "$RES"
	unmount_target ranks
}

# The devices phase: one mount over GPUs 0 and 1 (the host backend: two
# host devices, host_devices=2, as a smoke check), beside `cudaraw peer` in
# the same run. d0/ and d1/ place new files on device 0 and 1
# (user.vyre.device); every placement is read back before it is measured.
#   fio, bs 1M, psync: two jobs at once on SEQ-byte files, one in d0/ and one
#     in d1/, against two both in d0/: the write (with its fsync), then the
#     read (the median of REPS, caches dropped before each), aggregate GB/s.
#   A PEER-byte file moved to device 1 by setting its user.vyre.device, and
#     copied from d0/ by copy_file_range into a file of d1/ that has its
#     memory (fallocate), then into a new one as cp makes it (vybench move,
#     copyinto and copy, each with an fsync): the median of REPS after a
#     warm-up, against cudaraw peer's cuMemcpyPeerAsync of as many bytes;
#     peer_bytes and peer_staged_bytes of .vyre/stats over the last of each
#     show how the bytes went, and cmp that they all arrived. A move and a
#     new file take memory on device 1 on the way: its pool_hits say
#     whether the pool had it.
#   The move again on a mount with peer=off (through host memory).
on_device() { # FILE N: fail unless FILE lives on device N
	local d
	d=$(getfattr --absolute-names -n user.vyre.device --only-values "$1")
	[ "$d" = "$2" ] || { echo "bench: $1 is on device $d, not $2" >&2; return 1; }
}
device_dir() { mkdir "$1" && setfattr -n user.vyre.device -v "$2" "$1"; } # DIR N: new files in DIR go to N
stat_num() { # TARGET KEY: a stats figure that must be there
	local v
	v=$(stat_of "$1" "$2")
	[ -n "$v" ] || { echo "bench: ${MNT[$1]}/.vyre/stats has no $2" >&2; return 1; }
	echo "$v"
}
last_of() { awk -v k="$1" '$1 == k { v = $2 } END { print v }' "$RES"; } # KEY: its latest value in results.txt
ratio_of() { # A B: A / B, or n/a unless both are numbers
	awk -v a="$1" -v b="$2" 'BEGIN { n = "^[0-9]+([.][0-9]*)?$"; if (a ~ n && b ~ n && b > 0) printf "%.3f", a / b; else print "n/a" }'
}
# pattern FILE BYTES: a 1337-byte random line over and over (a period that
# no power of two divides, so a byte copied to the wrong place shows).
pattern() {
	local line
	line=$(head -c 1002 /dev/urandom | base64 -w0)
	{ yes "$line" || true; } | head -c "$2" | dd of="$1" bs=1M iflag=fullblock conv=fsync status=none
}

devices_fio() { # KEY DIR_A DEVICE_A DIR_B DEVICE_B
	local key=$1 a=$2/fio-a b=$4/fio-b job
	job=(--bs=1M --size="$SEQ" --ioengine=psync --group_reporting --name=a --filename="$a" --name=b --filename="$b")
	fio_run "devices-$key-write" --rw=write --end_fsync=1 "${job[@]}"
	put "devices.fio.$key.write_gbps" "$(fio_json "$OUT/fio-devices-$key-write.json" write gbps)"
	on_device "$a" "$3"
	on_device "$b" "$5"
	log "devices $key: $(grep -E '^dev[0-9]+\.resident_bytes ' "${MNT[devices]}/.vyre/stats" | tr '\n' ' ')"
	median_read "devices.fio.$key.read_gbps" "devices fio $key read" fio_gbps "devices-$key-read" read --rw=read "${job[@]}"
	rm -f "$a" "$b"
}

# devices_move TARGET KEY: d0/src's copy d0/mv moved to device 1 and back,
# REPS times after a warm-up; KEY_gbps is the median there, KEY_back_gbps
# back; KEY.peer_bytes, KEY.staged_bytes what the stats counted for the
# last move there.
devices_move() {
	local t=$1 key=$2 m=${MNT[$1]} f=${MNT[$1]}/d0/mv rep p0 g0 h0 peer staged hits there=() back=()
	"$BIN/vybench" copy "$m/d0/src" "$f" >/dev/null
	on_device "$f" 0
	log "devices $key warm-up: there $("$BIN/vybench" move "$f" 1), back $("$BIN/vybench" move "$f" 0) GB/s"
	for rep in $(seq "$REPS"); do
		p0=$(stat_num "$t" peer_bytes)
		g0=$(stat_num "$t" peer_staged_bytes)
		h0=$(stat_num "$t" dev1.pool_hits)
		there+=("$("$BIN/vybench" move "$f" 1)")
		peer=$(($(stat_num "$t" peer_bytes) - p0)) staged=$(($(stat_num "$t" peer_staged_bytes) - g0))
		hits=$(($(stat_num "$t" dev1.pool_hits) - h0))
		back+=("$("$BIN/vybench" move "$f" 0)")
	done
	log "devices $key: there ${there[*]}; back ${back[*]} GB/s"
	put "${key}_gbps" "$(median "${there[@]}")"
	put "${key}_back_gbps" "$(median "${back[@]}")"
	put "$key.peer_bytes" "$peer"
	put "$key.staged_bytes" "$staged"
	put "$key.pool_hits" "$hits"
	cmp -s "$m/d0/src" "$f" || { echo "bench: $f is not d0/src after its moves" >&2; return 1; }
	rm "$f"
}

devices_figures() {
	local n link raw='' m opts=devices=0,1 rep p0 g0 h0 hits v=() w=()
	if [ "$BACKEND" = cuda ]; then
		n=$(gpu_count)
		if [ "$n" -lt 2 ]; then
			echo "bench: the devices phase needs two GPUs; nvidia-smi lists $n: skipped (Fix: run it on a machine with two, or BENCH_BACKEND=host for a smoke check)" >&2
			log "devices: $n GPU(s): skipped"
			return 0
		fi
		put devices.gpus "$(nvidia-smi --query-gpu=name --format=csv,noheader | sed -n 1,2p | paste -sd '|' | sed 's/|/ | /g')"
		nvidia-smi topo -m >>"$OUT/log.txt" 2>&1 || true
		link=$(nvidia-smi topo -m 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | awk '$1 == "GPU0" && $2 == "X" { print $3; exit }')
		put devices.link "${link:-unknown}"
		raw=$("$BIN/cudaraw" peer "$PEER")
		echo "$raw" | sed 's/^raw\./devices.raw_/' | tee -a "$RES"
		raw=$(echo "$raw" | awk '$1 == "raw.peer_gbps" { print $2 }')
	else
		put devices.gpus "host backend, host_devices=2"
		log "devices: the host backend: no raw peer figure"
		opts=host_devices=2,$opts
	fi
	put devices.bytes "$PEER"
	mount_target devices "$opts"
	m=${MNT[devices]}
	device_dir "$m/d0" 0
	device_dir "$m/d1" 1
	if [ -x "$FIO" ]; then
		devices_fio two_gpus "$m/d0" 0 "$m/d1" 1
		devices_fio one_gpu "$m/d0" 0 "$m/d0" 0
		put devices.fio.read_ratio "$(ratio_of "$(last_of devices.fio.two_gpus.read_gbps)" "$(last_of devices.fio.one_gpu.read_gbps)")"
	else
		log "no fio (set FIO=/path/to/fio): the devices fio figures skipped"
	fi
	pattern "$m/d0/src" "$PEER"
	on_device "$m/d0/src" 0
	devices_move devices devices.move
	fallocate -l "$PEER" "$m/d1/dst"
	on_device "$m/d1/dst" 1
	log "devices copy warm-up: $("$BIN/vybench" copyinto "$m/d0/src" "$m/d1/dst") GB/s"
	for rep in $(seq "$REPS"); do
		p0=$(stat_num devices peer_bytes)
		g0=$(stat_num devices peer_staged_bytes)
		v+=("$("$BIN/vybench" copyinto "$m/d0/src" "$m/d1/dst")")
	done
	put devices.copy.peer_bytes "$(($(stat_num devices peer_bytes) - p0))"
	put devices.copy.staged_bytes "$(($(stat_num devices peer_staged_bytes) - g0))"
	log "devices copy: ${v[*]} GB/s"
	put devices.copy_gbps "$(median "${v[@]}")"
	cmp -s "$m/d0/src" "$m/d1/dst" || { echo "bench: d1/dst is not d0/src" >&2; return 1; }
	rm "$m/d1/dst"
	log "devices copy into a new file, warm-up: $("$BIN/vybench" copy "$m/d0/src" "$m/d1/new") GB/s"
	for rep in $(seq "$REPS"); do
		rm "$m/d1/new"
		h0=$(stat_num devices dev1.pool_hits)
		w+=("$("$BIN/vybench" copy "$m/d0/src" "$m/d1/new")")
		hits=$(($(stat_num devices dev1.pool_hits) - h0))
	done
	log "devices copy into a new file: ${w[*]} GB/s"
	put devices.copy_new_gbps "$(median "${w[@]}")"
	put devices.copy_new.pool_hits "$hits"
	on_device "$m/d1/new" 1
	cmp -s "$m/d0/src" "$m/d1/new" || { echo "bench: d1/new is not d0/src" >&2; return 1; }
	log "devices stats: $(grep -E '^(peer_|dev[0-9]+\.resident_bytes )' "$m/.vyre/stats" | tr '\n' ' ')"
	unmount_target devices
	# The same move through host memory.
	mount_target devices_staged "$opts,peer=off"
	device_dir "${MNT[devices_staged]}/d0" 0
	pattern "${MNT[devices_staged]}/d0/src" "$PEER"
	devices_move devices_staged devices.move_staged
	unmount_target devices_staged
	put devices.move_ratio "$(ratio_of "$(last_of devices.move_gbps)" "$raw")"
	put devices.copy_ratio "$(ratio_of "$(last_of devices.copy_gbps)" "$raw")"
	put devices.copy_new_ratio "$(ratio_of "$(last_of devices.copy_new_gbps)" "$raw")"
	put devices.move_over_staged "$(ratio_of "$(last_of devices.move_gbps)" "$(last_of devices.move_staged_gbps)")"
}

# The survive and steady and takeover phases (survive=on).
. bench/survive.sh

main() {
	if has raw; then
		meta
		if [ "$BACKEND" = cuda ]; then
			"$BIN/cudaraw" bench/noop.ptx | tee -a "$RES"
		fi
		"$BIN/poolbench" "$BACKEND" | tee -a "$RES"
	fi
	# The state log's append against memcpy of the same bytes (no mount,
	# no device: the same on every backend).
	if has state; then
		"$BIN/statebench" $([ "$QUICK" = 1 ] && echo 20000) | tee -a "$RES"
	fi
	mount_target vyrefs
	mount_target nullfs
	mount_target tmpfs
	if has dd; then seq_dd vyrefs nullfs tmpfs; fi
	if [ -x "$FIO" ]; then
		if has fio; then for t in vyrefs nullfs tmpfs; do seq_fio "$t"; done; fi
		if has rand; then for t in vyrefs nullfs tmpfs; do rand_fio "$t"; done; fi
	else
		log "no fio (set FIO=/path/to/fio): fio figures skipped"
	fi
	if has ctl; then ctl_figures; fi
	if has std; then std_figures; fi
	# Mapping into PyTorch against reading (bench/map_bench.py): the GPU
	# machine has torch; elsewhere the phase says why it is skipped.
	if has map; then
		if [ "$BACKEND" = cuda ] && python3 -c 'import torch' 2>/dev/null; then
			VYREFS_LIB=$PWD/$BUILD/libvyrefs.so PYTHONPATH=$PWD/client/python \
				python3 bench/map_bench.py "${MNT[vyrefs]}" "${MNT[tmpfs]}" | tee -a "$RES"
		else
			log "map figures need the cuda backend and torch: skipped"
		fi
	fi
	# A mount over a directory against fio, transformers and vyrefs cp
	# (bench/tier_bench.py), opt-in: a 7B model on the disk under
	# BENCH_DISK (default /var/tmp), and a copy in the tmpfs.
	if has tier; then
		if [ "$BACKEND" = cuda ] && python3 -c 'import torch, transformers' 2>/dev/null; then
			disk=$(mktemp -d "${BENCH_DISK:-/var/tmp}/vyrefs-tier.XXXXXX")
			VYREFS_LIB=$PWD/$BUILD/libvyrefs.so PYTHONPATH=$PWD/client/python VYREFS_BIN=$PWD/$BUILD/vyrefs FIO=$FIO \
				python3 bench/tier_bench.py "$disk" "${MNT[tmpfs]}" "${TMPDIR:-/tmp}" "$QUICK" | tee -a "$RES"
			rm -rf "$disk" "${MNT[tmpfs]}/llama"
		else
			log "tier figures need the cuda backend, torch and transformers: skipped"
		fi
	fi
	# A whole model to its first answer (bench/attach_bench.py), opt-in.
	if has attach; then
		if [ "$BACKEND" = cuda ] && python3 -c 'import torch, transformers' 2>/dev/null; then
			VYREFS_LIB=$PWD/$BUILD/libvyrefs.so PYTHONPATH=$PWD/client/python VYREFS_BIN=$PWD/$BUILD/vyrefs \
				python3 bench/attach_bench.py "${MNT[vyrefs]}" "${MNT[tmpfs]}" "$QUICK" | tee -a "$RES"
			rm -rf "${MNT[vyrefs]}/llama" "${MNT[tmpfs]}/llama" "${MNT[tmpfs]}/flags"
		else
			log "attach figures need the cuda backend, torch and transformers: skipped"
		fi
	fi
	# A converted model's first and later attaches against transformers'
	# own load (bench/families_bench.py), opt-in.
	if has families; then
		if [ "$BACKEND" = cuda ] && python3 -c 'import torch, transformers' 2>/dev/null; then
			reps=${BENCH_REPS:-5} # FAMILIES_SIZE=large: about 1 GB each (tests/gpu/families_check.py)
			[ "$QUICK" = 1 ] && reps=2
			VYREFS_LIB=$PWD/$BUILD/libvyrefs.so PYTHONPATH=$PWD/client/python VYREFS=$PWD/$BUILD/vyrefs \
				python3 bench/families_bench.py "${MNT[vyrefs]}" "${MNT[tmpfs]}" "$reps" | tee -a "$RES"
			rm -rf "${MNT[vyrefs]}/qwen3_moe" "${MNT[vyrefs]}/mixtral" "${MNT[vyrefs]}/t5" \
				"${MNT[tmpfs]}/qwen3_moe" "${MNT[tmpfs]}/mixtral" "${MNT[tmpfs]}/t5"
		else
			log "families figures need the cuda backend, torch and transformers: skipped"
		fi
	fi
	# An attached model's forward passes against transformers' own load of
	# it, same GPU, same process (bench/exact_bench.py), opt-in: 1.1B, its
	# tied twin, and 7B (BENCH_QUICK=1: 1.1B only, 3 rounds).
	if has exact; then
		if [ "$BACKEND" = cuda ] && python3 -c 'import torch, transformers' 2>/dev/null; then
			shapes="1b tied1b 7b" rounds=7
			[ "$QUICK" = 1 ] && shapes=1b rounds=3
			for shape in $shapes; do
				VYREFS_LIB=$PWD/$BUILD/libvyrefs.so PYTHONPATH=$PWD/client/python VYREFS_BIN=$PWD/$BUILD/vyrefs \
					python3 bench/exact_bench.py "${MNT[vyrefs]}" "${MNT[tmpfs]}" "$shape" "$rounds" | tee -a "$RES"
				rm -rf "${MNT[vyrefs]}/exact-$shape" "${MNT[tmpfs]}/exact-$shape"
			done
		else
			log "exact figures need the cuda backend, torch and transformers: skipped"
		fi
	fi
	# vyrefs cp and safetensors against readers and writers of tmpfs
	# (bench/ingest_bench.py).
	if has ingest; then
		VYREFS_LIB=$PWD/$BUILD/libvyrefs.so PYTHONPATH=$PWD/client/python \
			python3 bench/ingest_bench.py "$BUILD/vyrefs" "${MNT[vyrefs]}" "${MNT[tmpfs]}" "$SEQ" | tee -a "$RES"
	fi
	if has cp; then for t in vyrefs nullfs tmpfs; do copy_in_mount "$t"; done; fi
	if has handles; then handle_figures; fi
	if has churn; then
		local hits0 miss0
		hits0=$(stat_of vyrefs pool_hits) miss0=$(stat_of vyrefs pool_misses)
		for t in vyrefs nullfs tmpfs; do churn "$t"; done
		put churn.vyrefs.pool_hit_rate "$(awk -v h0="$hits0" -v m0="$miss0" -v h="$(stat_of vyrefs pool_hits)" \
			-v m="$(stat_of vyrefs pool_misses)" 'BEGIN { d = (h - h0) + (m - m0); printf "%.4f", d ? (h - h0) / d : 0 }')"
	fi
	unmount_target vyrefs
	if has churn || has dd; then
		mount_target vyrefs pool_budget=0,write_behind=off,readahead=off
		if has churn; then churn vyrefs vyrefs_nopool; fi
		if has dd; then features_off_ab; fi
		unmount_target vyrefs
	fi
	unmount_target nullfs
	unmount_target tmpfs
	if has grow; then grow_figures; fi
	if has loop && [ -x "$FIO" ]; then loops_ab; fi
	if has devices; then devices_figures; fi
	if has ranks; then ranks_figures; fi
	if has survive; then survive_figures; fi
	if has steady; then steady_figures; fi
	if has takeover; then takeover_figures; fi
	python3 bench/report.py "$RES" "$OUT"
}
main
