#!/usr/bin/env bash
# run.sh: long (minutes: it starts first)
# bench/: the null FUSE fs is a real filesystem (it stores and returns the
# bytes it is given), and `make bench` runs end to end at smoke sizes on the
# backend under test, producing every figure and the report.
. tests/skip.sh
backend=${VY_TEST_BACKEND:-host}
BUILD=${BUILD:-build}

test_nullfs_keeps_bytes_and_unmounts_cleanly() {
	local m src
	m=$(mktemp -d /tmp/nullfs-mnt.XXXXXX) && src=$(mktemp /tmp/nullfs-src.XXXXXX) || return 1
	head -c $((5 << 20)) /dev/urandom >"$src"
	env --default-signal=INT "$BUILD/bench/nullfs" "$m" &
	local pid=$!
	for _ in $(seq 100); do mountpoint -q "$m" && break; sleep 0.05; done
	assertTrue "nullfs mounted" "mountpoint -q $m"
	dd if="$src" of="$m/a" bs=4K status=none
	cp "$m/a" "$m/b"
	assertEquals "dd then cp keep the bytes" "$(sha256sum <"$src")" "$(sha256sum <"$m/b")"
	truncate -s 1000 "$m/b"
	assertEquals 1000 "$(stat -c %s "$m/b")"
	assertEquals "$(head -c 1000 "$src" | sha256sum)" "$(sha256sum <"$m/b")"
	kill -TERM $pid
	wait $pid
	assertEquals "nullfs exit status" 0 $?
	assertFalse "unmounted" "mountpoint -q $m"
	rm -rf "$m" "$src"
}

test_bench_runs_end_to_end_at_smoke_sizes() {
	need_root "bench/run.sh mounts a tmpfs to compare with" || return 0
	local out key rc
	out=$(mktemp -d /tmp/vybench-out.XXXXXX) || return 1
	BENCH_QUICK=1 BENCH_REPS=3 BENCH_BACKEND=$backend BENCH_OUT=$out bench/run.sh >"$out/stdout" 2>&1
	rc=$? # before the message's $(tail): it sets $? too
	assertEquals "bench/run.sh: $(tail -5 "$out/stdout")" 0 $rc
	for key in dd.vyrefs.write.4K dd.nullfs.read.4M dd.tmpfs.write.1M rtt.nullfs_us rtt.vyrefs_us \
		ctl.fill_gbps cp.vyrefs.gbps churn.vyrefs.ops churn.vyrefs_nopool.ops store.pool_alloc_free_us \
		dd.vyrefs_nowb.write.4K dd.vyrefs_nora.read.1M grow.host.first_us_per_mib grow.host.last_us_per_mib \
		grow.host.grows grow.tmpfs.last_us_per_mib handles.vyrefs.open_us handles.vyrefs.readdir_us \
		handles.nullfs.open_us handles.tmpfs.readdir_us handles.open_over_nullfs \
		state.append_ns state.memcpy_ns state.append_ratio state.xxh3_ns; do
		assertTrue "$key is a positive number: $(grep "^$key " "$out/results.txt")" \
			"awk -v k=$key '\$1 == k && \$2 + 0 > 0 { f = 1 } END { exit !f }' $out/results.txt"
	done
	# The pool served every churn allocation but the first.
	assertTrue "pool hit rate $(grep pool_hit_rate "$out/results.txt")" \
		"awk '\$1 == \"churn.vyrefs.pool_hit_rate\" && \$2 > 0.99 { f = 1 } END { exit !f }' $out/results.txt"
	# A single-stream read figure is the median of its 3 logged samples.
	local samples
	samples=$(sed -n 's/^== dd nullfs read bs=4M: //p' "$out/log.txt")
	assertEquals "3 samples: $samples" 3 "$(echo "$samples" | wc -w)"
	assertEquals "the median of $samples" "$(echo "$samples" | tr ' ' '\n' | sort -g | sed -n 2p)" \
		"$(awk '$1 == "dd.nullfs.read.4M" { print $2 }' "$out/results.txt")"
	assertContains "$(cat "$out/figures.md")" "### Targets"
	assertContains "$(cat "$out/figures.md")" "### A handle's life"
	# The append loop filled the host mount's budget, copying under 2 MiB.
	assertTrue "grow.host.d2d_bytes $(grep grow.host.d2d "$out/results.txt")" \
		"awk '\$1 == \"grow.host.d2d_bytes\" && \$2 < 2097152 { f = 1 } END { exit !f }' $out/results.txt"
	if command -v fio >/dev/null; then
		assertTrue "fio figures" "grep -q '^fio.nullfs.rand.qd32.j4.iops [0-9]' $out/results.txt"
		assertTrue "libfuse's loop figures" "grep -q '^fio.nullfs_libfuse.rand.qd32.j4.iops [0-9]' $out/results.txt && grep -q '^fio.vyrefs_ours.rand.qd1.j1.iops [0-9]' $out/results.txt"
	fi
	rm -rf "$out"
}

# The devices phase over two devices (the host backend: host_devices=2):
# every figure, and .vyre/stats saying that each move and copy went device
# to device, and with peer=off through host memory, byte for byte.
test_devices_phase_at_smoke_sizes() {
	need_root "bench/run.sh mounts a tmpfs to compare with" || return 0
	local out key bytes want rc
	if [ "$backend" = cuda ] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -lt 2 ]; then
		skip_test "the devices phase on cuda needs two GPUs"
		return
	fi
	need getfattr setfattr || return
	out=$(mktemp -d /tmp/vybench-out.XXXXXX) || return 1
	BENCH_QUICK=1 BENCH_BACKEND=$backend BENCH_PHASES=devices BENCH_OUT=$out bench/run.sh >"$out/stdout" 2>&1
	rc=$?
	assertEquals "bench/run.sh: $(tail -5 "$out/stdout")" 0 $rc
	for key in devices.move_gbps devices.move_back_gbps devices.copy_gbps devices.copy_new_gbps devices.move_staged_gbps; do
		assertTrue "$key is a positive number: $(grep "^$key " "$out/results.txt")" \
			"awk -v k=$key '\$1 == k && \$2 + 0 > 0 { f = 1 } END { exit !f }' $out/results.txt"
	done
	if command -v fio >/dev/null; then
		assertTrue "fio figures" "grep -q '^devices.fio.two_gpus.read_gbps [0-9]' $out/results.txt && grep -q '^devices.fio.one_gpu.read_gbps [0-9]' $out/results.txt"
	fi
	bytes=$(awk '$1 == "devices.bytes" { print $2 }' "$out/results.txt")
	assertEquals "the smoke size" $((64 << 20)) "$bytes"
	for want in "devices.move.peer_bytes $bytes" "devices.move.staged_bytes 0" "devices.copy.peer_bytes $bytes" \
		"devices.copy.staged_bytes 0" "devices.move_staged.peer_bytes 0" "devices.move_staged.staged_bytes $bytes"; do
		assertEquals "$want" "$want" "$(grep "^${want% *} " "$out/results.txt")"
	done
	assertContains "$(cat "$out/figures.md")" "### Multi-GPU"
	rm -rf "$out"
}

. tests/shunit.sh
