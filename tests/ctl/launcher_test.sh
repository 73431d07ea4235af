#!/usr/bin/env bash
# The launcher process on the host backend: sequences run there over memory
# the daemon exports (memfd), only the buffers a sequence names are mapped
# and given back when their files go, and a launcher killed in the middle
# of a sequence or past launch_timeout costs only that sequence: the mount
# goes on, a new launcher runs the next one, and accounting is back to the
# baseline at unmount.
. tests/fs/lib.sh

setUp() {
	mount_vyrefs "launch_timeout=3s" || { fail "mount"; return 1; }
}

run_seq() { # TEXT: write it to ctl in one write; print the reply or the error
	python3 - "$MNT/.vyre/ctl" "$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    os.write(fd, sys.argv[2].encode())
    print(os.read(fd, 4096).decode(), end="")
except OSError as e:
    print("write error:", e.strerror)
PY
}

# Mappings of buffers (memfd:vyrefs-buffer) in the launcher's address space.
mapped_buffers() {
	local pid
	pid=$(launcher_pid)
	[ -n "$pid" ] || { echo none; return; }
	grep -c 'vyrefs-buffer' "/proc/$pid/maps"
}

# Bytes of those mappings.
mapped_bytes() {
	local n=0 from to
	while IFS='- ' read -r from to _; do n=$((n + 0x$to - 0x$from)); done \
		< <(grep vyrefs-buffer "/proc/$(launcher_pid)/maps")
	echo "$n"
}

test_sequences_run_in_a_launcher_of_their_own() {
	assertEquals "no launcher before the first sequence" "" "$(launcher_pid)"
	truncate -s 16 "$MNT/a"
	out=$(run_seq $'fill a 9\n')
	assertContains "$out" "ok seq="
	pid=$(launcher_pid)
	assertNotEquals "a launcher runs" "" "$pid"
	assertEquals "it is vyrefs itself" "$(readlink "/proc/$VY_DAEMON/exe")" "$(readlink "/proc/$pid/exe")"
	assertEquals "--launcher" "$(tr '\0' ' ' <"/proc/$pid/cmdline" | awk '{print $2}')"
	assertEquals "the mounting user's" "$(stat -c %u "/proc/$VY_DAEMON")" "$(stat -c %u "/proc/$pid")"
	assertEquals "$(printf '\t%.0s' $(seq 16))" "$(tr '\t' '\t' <"$MNT/a" | tr '\011' '\011')"
	assertEquals 1 "$(stat_of launcher_starts)"
	assertEquals 0 "$(stat_of launcher_restarts)"
	run_seq $'fill a 1\n' >/dev/null
	assertEquals "the same launcher runs the next" "$pid" "$(launcher_pid)"
}

test_launcher_maps_only_the_buffers_a_sequence_names() {
	# The host backend's buffers show in /proc/PID/maps; the GPU's do not.
	[ "$backend" = host ] || { skip_test "memfd mappings in /proc are the host backend's"; return; }
	for f in a b c; do truncate -s 3M "$MNT/$f"; done
	assertContains "$(run_seq $'fill a 1\n')" "ok seq="
	assertEquals "one file named, one mapping" 1 "$(mapped_buffers)"
	assertContains "$(run_seq $'copy a b\n')" "ok seq="
	assertEquals "two files named" 2 "$(mapped_buffers)"
	assertEquals "exported once each" 2 "$(stat_of exports)"
	resident=$(stat_of resident_bytes)
	# Truncated up, they were holes; the two a sequence named got memory
	# (4 MiB each, the share granularity), and c, never named, has none.
	assertEquals "a and b take 4 MiB each, c nothing" $((2 * 4 * 1024 * 1024)) "$resident"
	assertEquals "c is holes" 0 "$(stat -c %b "$MNT/c")"
	rm "$MNT/a"
	assertEquals "a freed file's mapping is taken back at once" 1 "$(mapped_buffers)"
	assertEquals "and its memory is free" $((4 * 1024 * 1024)) "$(stat_of resident_bytes)"
	assertEquals "b holds a's bytes" 3145728 "$(tr -d '\0' <"$MNT/b" | wc -c)"
	truncate -s 8M "$MNT/b" # it grows in place by a 4 MiB piece: a new generation
	assertContains "$(run_seq $'fill b 2 0 1\n')" "ok seq="
	assertEquals "the old mapping went; the new one is b's two pieces" "2 8388608" "$(mapped_buffers) $(mapped_bytes)"
	assertEquals 3 "$(stat_of exports)"
}

test_small_files_move_to_memory_of_their_own_once() {
	printf 'hello' >"$MNT/s"
	printf 'world' >"$MNT/t"
	d2d=$(stat_of d2d_bytes)
	assertContains "$(run_seq $'copy s t\n')" "ok seq="
	assertEquals "hello" "$(cat "$MNT/t")"
	assertEquals "two small files moved" 2 "$(stat_of share_moves)"
	assertEquals "their buffers (a page each), then the copy's 5 bytes" $((d2d + 4096 * 2 + 5)) "$(stat_of d2d_bytes)"
	assertEquals "each holds 2 MiB now" $((2 * 2 * 1024 * 1024)) "$(stat_of resident_bytes)"
	assertContains "$(run_seq $'copy t s\n')" "ok seq="
	assertEquals "no move twice" 2 "$(stat_of share_moves)"
}

test_killed_launcher_costs_only_its_sequence() {
	unmount_vyrefs
	mount_vyrefs "launch_timeout=60s" || { fail "mount"; return 1; }
	head -c 1000000 /dev/urandom >"$MNT.src"
	cp "$MNT.src" "$MNT/kept" || fail "cp"
	sum=$(sha256sum <"$MNT/kept")
	truncate -s 64M "$MNT/f"
	python3 - "$MNT/.vyre/ctl" >"$MNT.out" 2>&1 <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, b"repeat 10000000\nfill f 1\nend\n")
    print("wrote")
except OSError as e:
    print("write error:", e.strerror)
PY
	writer=$!
	wait_for "the launcher runs the sequence" running_sequence || return 1
	pid=$(launcher_pid)
	assertNotEquals "the launcher runs the sequence" "" "$pid"
	kill -9 "$pid"
	wait "$writer"
	assertEquals "write error: Input/output error" "$(cat "$MNT.out")"
	log=$(tail -n 1 "$MNT/.vyre/log")
	assertContains "$log" "the launcher died while running the sequence (killed by signal 9)"
	assertContains "$log" "'f' may hold partial results; every other file is intact"
	assertContains "$log" "(Fix: "
	assertEquals "the other file is intact" "$sum" "$(sha256sum <"$MNT/kept")"
	assertEquals "the launcher holds no sequence once it is answered" 0 "$(stat_of launcher_sequences)"
	out=$(run_seq $'fill f 2 0 16\n')
	assertContains "the next sequence runs" "$out" "ok seq="
	assertEquals 1 "$(stat_of launcher_restarts)"
	assertNotEquals "in a new launcher" "$pid" "$(launcher_pid)"
	rm -f "$MNT.src" "$MNT.out" "$MNT/f" "$MNT/kept"
	assertEquals "every byte back" 0 "$(stat_of resident_bytes)"
	unmount_vyrefs
	assertReleased
}

test_launch_timeout_stops_a_sequence_and_the_mount_goes_on() {
	unmount_vyrefs
	mount_vyrefs "launch_timeout=1s" || { fail "mount"; return 1; }
	truncate -s 64M "$MNT/f"
	start=$(date +%s%N)
	out=$(run_seq $'repeat 10000000\nfill f 1\nend\n')
	ms=$((($(date +%s%N) - start) / 1000000))
	assertEquals "write error: Connection timed out" "$out"
	assertTrue "stopped after the second, not at the end: ${ms} ms" "[ $ms -ge 900 ] && [ $ms -lt 10000 ]"
	log=$(tail -n 1 "$MNT/.vyre/log")
	assertContains "$log" "ran past launch_timeout (1000 ms)"
	assertContains "$log" "raise launch_timeout"
	assertEquals "no launcher holds a sequence after its timeout" 0 "$(stat_of launcher_sequences)"
	assertContains "$(run_seq $'fill f 3 0 1\n')" "ok seq="
	assertEquals "nor after a sequence that ran" 0 "$(stat_of launcher_sequences)"
	assertEquals 1 "$(stat_of launcher_restarts)"
	assertContains "$(cat "$MNT/.vyre/config")" "launch_timeout = 1000ms"
}

# A 10,000,000-step sequence whose writer is killed: FUSE sends INTERRUPT,
# the sequence stops at its next step, the write is answered, and the
# writer is gone at once (not left in D state); stats answer meanwhile.
test_killing_the_writer_stops_its_sequence() {
	unmount_vyrefs
	mount_vyrefs "launch_timeout=0" || { fail "mount"; return 1; }
	truncate -s 64M "$MNT/f"
	python3 - "$MNT/.vyre/ctl" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"repeat 10000000\nfill f 1\nend\n")
PY
	writer=$!
	wait_for "the launcher runs the sequence" running_sequence || return 1
	assertContains "stats answer while it runs" "$(timeout 60 cat "$MNT/.vyre/stats")" "sequences"
	kill -9 "$writer"
	# Events, not durations: the writer goes, then the sequence stops
	# (launch_timeout=0: nothing else would stop it).
	wait_for "the writer is gone" exited "$writer"
	wait "$writer" 2>/dev/null
	wait_for "the sequence stops after its writer was killed" grep -q "stopped after" "$MNT/.vyre/log"
	log=$(tail -n 1 "$MNT/.vyre/log")
	assertContains "$log" "the sequence was stopped after"
	assertContains "$log" "'f' may hold partial results"
	assertEquals "the launcher stopped, it was not killed" 0 "$(stat_of launcher_restarts)"
	assertContains "$(run_seq $'fill f 2 0 1\n')" "ok seq="
}

test_sigterm_unmounts_within_seconds_while_a_sequence_runs() {
	unmount_vyrefs
	mount_vyrefs "launch_timeout=0" || { fail "mount"; return 1; }
	truncate -s 64M "$MNT/f"
	run_seq $'repeat 10000000\nfill f 1\nend\n' >"$MNT.out" &
	writer=$!
	wait_for "the launcher runs the sequence" running_sequence || return 1
	kill -TERM "$VY_PID"
	# launch_timeout=0: only SIGTERM can stop the sequence and the daemon.
	wait_for "the daemon exits on SIGTERM while a sequence runs" exited "$VY_PID"
	wait "$writer" 2>/dev/null
	assertContains "$(cat "$MNT.out")" "write error"
	wait "$VY_PID" 2>/dev/null
	VY_STATUS=$?
	assertReleased
	rm -f "$MNT.out"
	rmdir "$MNT" 2>/dev/null
	MNT=""
}

# The first sequence of a fresh mount, with a GPU's channel timing replayed
# by a shim (tests/ctl/chanrace.c: HELLO counted late, a slow launcher
# start): the launcher once took HELLO's late count for a second message,
# waited on the socket while the sequence came through the mailbox, and
# the write timed out after launch_timeout.
test_the_first_sequence_survives_a_gpus_channel_timing() {
	unmount_vyrefs
	shim=$PWD/$BUILD/tests/ctl/chanrace.so
	[ -f "$shim" ] || { fail "no $shim (make builds it)"; return 0; }
	for round in 1 2 3; do
		LD_PRELOAD=$shim mount_vyrefs "launch_timeout=2s" || { fail "mount"; return 0; }
		truncate -s 1M "$MNT/ra"
		out=$(run_seq $'fill ra 66 100 10\n')
		assertNotContains "round $round: $out" "$out" "write error"
		assertEquals "round $round: the fill landed" "BBBBBBBBBB" "$(dd if="$MNT/ra" bs=1 skip=100 count=10 status=none)"
		unmount_vyrefs
		assertReleased
	done
}

test_bad_launch_timeout_is_refused() {
	for bad in 1x -1 60S ms 99999999999; do
		err=$("$VYREFS" -o "backend=host,launch_timeout=$bad" /nonexistent 2>&1)
		assertContains "$bad" "$err" "bad value '$bad' for launch_timeout"
		assertContains "$bad" "$err" "(Fix: "
	done
}

# running_sequence: the launcher holds the sequence (the daemon has mapped
# its buffers and sent it; `launcher_sequences` goes back to 0 when it is
# answered), so a stop or a kill now meets it running: an event, not a wait.
running_sequence() {
	[ "$(stat_of launcher_sequences)" = 1 ] && [ -n "$(launcher_pid)" ]
}

. tests/shunit.sh
