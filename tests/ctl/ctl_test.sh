#!/usr/bin/env bash
# The control file on a real mount: fill, clear, copy and repeat results
# checked byte for byte; errors as write errors with a readable reply; the
# log; all-or-nothing validation; page cache dropped after device writes.
. tests/fs/lib.sh
CTL=""

setUp() {
	mount_vyrefs || { fail "mount"; return 1; }
	CTL="$MNT/.vyre/ctl"
}

# Write a sequence in one write() and print the reply read back from the
# same open file.
run_seq() {
	python3 - "$CTL" "$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    os.write(fd, sys.argv[2].encode())
    status = "written"
except OSError as e:
    status = "write error: " + os.strerror(e.errno)
print(status)
print(os.read(fd, 4096).decode(), end="")
try:
    os.close(fd)
except OSError as e:
    print("close error: " + os.strerror(e.errno))
PY
}

test_fill_clear_copy_results() {
	truncate -s 64 "$MNT/a"
	printf 'abcdefgh' >"$MNT/b"
	echo 'fill a 0x41' >"$CTL" || fail "fill"
	assertEquals "$(printf 'A%.0s' $(seq 64))" "$(cat "$MNT/a")"
	echo 'fill a 0x42 8 4' >"$CTL"
	assertEquals "AAAAAAAABBBBAAAA" "$(head -c 16 "$MNT/a")"
	echo 'copy b a 2 1 3' >"$CTL"
	assertEquals "AcdeAAAABBBBAAAA" "$(head -c 16 "$MNT/a")"
	echo 'copy b a' >"$CTL"
	assertEquals "abcdefghBBBBAAAA" "$(head -c 16 "$MNT/a")"
	echo 'clear a' >"$CTL"
	assertEquals " 00 00 00 00" "$(od -An -tx1 -N4 "$MNT/a")"
	assertEquals 0 "$(tr -d '\0' <"$MNT/a" | wc -c)"
	assertEquals "fills and clears move no host bytes" 8 "$(stat_of h2d_bytes)"
}

test_repeat_runs_its_steps_n_times_with_one_sync() {
	truncate -s 4096 "$MNT/r"
	syncs=$(stat_of syncs)
	moves=$(stat_of share_moves)
	out=$(run_seq $'repeat 1000\nfill r 7 0 16\ncopy r r 0 2048 16\nend\n')
	assertContains "$out" "written"
	assertContains "$out" "ok seq="
	assertContains "$out" "steps=2000"
	# The launcher maps memory of the file's own: a small file moves to
	# it once (one device copy, one sync), then stays there.
	assertEquals "the small file moved once" $((moves + 1)) "$(stat_of share_moves)"
	assertEquals "one sync for the move, one for the sequence" $((syncs + 2)) "$(stat_of syncs)"
	assertEquals 2000 "$(stat_of steps)"
	assertEquals 32 "$(tr -d '\0' <"$MNT/r" | wc -c)"
	syncs=$(stat_of syncs)
	run_seq $'repeat 1000\nfill r 7 0 16\ncopy r r 0 2048 16\nend\n' >/dev/null
	assertEquals "no second move" $((moves + 1)) "$(stat_of share_moves)"
	assertEquals "one sync for the sequence" $((syncs + 1)) "$(stat_of syncs)"
	assertEquals 4000 "$(stat_of steps)"
}

test_errors_are_write_errors_with_a_reply() {
	truncate -s 16 "$MNT/a"
	out=$(run_seq $'fill a 1\nfill a 256\n')
	assertContains "$out" "write error: Invalid argument"
	assertContains "$out" "error seq="
	assertContains "$out" "line 2: bad byte '256'"
	assertContains "$out" "(Fix: "
	assertEquals "nothing of the refused sequence ran" 0 "$(tr -d '\0' <"$MNT/a" | wc -c)"
	out=$(run_seq $'fill a 1\nfill a 1 10 10\n')
	assertContains "$out" "line 2: 10 bytes at offset 10 do not fit 'a' of 16 bytes"
	assertEquals "validation is all or nothing" 0 "$(tr -d '\0' <"$MNT/a" | wc -c)"
	out=$(run_seq $'repeat 2\n')
	assertContains "an open repeat waits, then fails at close: $out" "$out" "close error: Invalid argument"
	for bad in 'bogus a' 'fill missing 1' 'fill .vyre/stats 1' 'end' 'launch k grid=1 block=1' \
		'launch m.k grid=1 block=1' 'copy a a 0 4 8' 'repeat 99999999999
fill a 1
end'; do
		out=$(run_seq "$bad"$'\n')
		assertContains "$bad: $out" "$out" "error seq="
		assertContains "$bad" "$out" "(Fix: "
	done
	(echo 'fill a 300' >"$CTL") 2>"$MNT.err"
	assertContains "$(cat "$MNT.err")" "Invalid argument"
	rm -f "$MNT.err"
}

test_empty_file_has_no_buffer_to_fill() {
	: >"$MNT/empty"
	out=$(run_seq $'fill empty 1\n')
	assertContains "$out" "'empty' is empty: it has no device buffer"
}

test_statements_wait_for_the_rest_of_the_line() {
	truncate -s 8 "$MNT/p"
	out=$(python3 - "$CTL" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, b"fill p 0x4")       # a partial line waits
first = os.read(fd, 4096)
os.write(fd, b"1\nrepeat 2\n")    # completes the fill; the repeat waits
second = os.read(fd, 4096).decode()
os.write(fd, b"fill p 0x43 0 2\nend\n")
third = os.read(fd, 4096).decode()
os.close(fd)
print(repr(first), second.strip(), "|", third.strip())
PY
)
	assertContains "$out" "b''"
	assertContains "$out" "steps=1"
	assertContains "$out" "steps=2"
	assertEquals "CCAAAAAA" "$(cat "$MNT/p")"
}

# Text over 1 MiB without a newline is refused; the rest of that line, in
# later writes, is dropped up to its newline rather than run.
test_the_rest_of_an_overlong_line_is_not_run() {
	truncate -s 16 "$MNT/a"
	out=$(python3 - "$MNT/.vyre/ctl" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    for _ in range(3):
        os.write(fd, b"x" * (512 * 1024))
    print("no refusal")
except OSError as e:
    print("refused:", e.strerror)
os.write(fd, b"fill a 9 0 16 yyy\nfill a 7 0 1\n")
os.close(fd)
PY
)
	assertContains "$out" "refused: Invalid argument"
	assertContains "$(cat "$MNT/.vyre/log")" "unfinished text over 1 MiB"
	assertEquals "the line's rest was dropped, the next line ran" "07" "$(head -c 1 "$MNT/a" | od -An -tx1 | tr -d ' ')"
	assertEquals "one error in the log" 1 "$(grep -c error "$MNT/.vyre/log")"
}

test_a_module_over_256_mib_is_not_kept() {
	err=$(head -c $((257 * 1048576)) /dev/zero 2>/dev/null | dd of="$MNT/.vyre/modules/big.ptx" bs=1M status=none 2>&1)
	assertContains "$err" "File too large"
	assertFalse "not listed: what arrived is not the module" "[ -e '$MNT/.vyre/modules/big.ptx' ]"
	err=$( (echo "launch big.k grid=1 block=1") 2>&1 >"$MNT/.vyre/ctl")
	assertContains "$(tail -n 1 "$MNT/.vyre/log")" "module 'big'"
}

test_unfinished_text_at_close_is_an_error() {
	truncate -s 8 "$MNT/u"
	out=$(python3 - "$CTL" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"repeat 3\nfill u 1\n")
try:
    os.close(fd)
    print("closed")
except OSError as e:
    print("close error:", os.strerror(e.errno))
PY
)
	assertContains "$out" "close error: Invalid argument"
	assertContains "$(tail -n 1 "$MNT/.vyre/log")" "unfinished at close"
	assertEquals 0 "$(tr -d '\0' <"$MNT/u" | wc -c)"
}

test_log_keeps_outcomes_with_pid_and_time() {
	truncate -s 8 "$MNT/l"
	echo 'fill l 1' >"$CTL"
	echo 'fill l 999' >"$CTL" 2>/dev/null
	log=$(cat "$MNT/.vyre/log")
	assertEquals 2 "$(printf '%s\n' "$log" | wc -l)"
	assertTrue "first ok: $log" "printf '%s\n' \"\$log\" | head -n 1 | grep -Eq '^seq=1 time=[0-9T:-]+Z pid=[0-9]+ ok steps=1 device_us=[0-9]+ wall_us=[0-9]+$'"
	assertContains "$(printf '%s\n' "$log" | tail -n 1)" "seq=2"
	assertContains "$(printf '%s\n' "$log" | tail -n 1)" "error line 1: bad byte '999'"
}

test_launch_on_host_names_the_cuda_backend() {
	[ "$backend" = host ] || skip_test "the host backend's refusal"
	truncate -s 64 "$MNT/y"
	printf '.version 8.0\n.target sm_90\n.address_size 64\n' >"$MNT/.vyre/modules/k.ptx" || fail "module copy"
	out=$(run_seq $'launch k.k grid=1 block=1 y\n')
	assertContains "$out" "write error"
	assertContains "$out" "cuda backend"
}

test_module_files_in_modules_dir() {
	M="$MNT/.vyre/modules"
	cp tests/gpu/fixtures/kernels.ptx "$M/k.ptx" || fail "module file" # real PTX: loads on cuda too
	assertEquals "k.log k.ptx" "$(ls "$M" | tr '\n' ' ' | sed 's/ $//')"
	cmp tests/gpu/fixtures/kernels.ptx "$M/k.ptx" || fail "module bytes"
	if [ "$backend" = host ]; then
		assertContains "$(cat "$M/k.log")" "kept, not compiled"
	fi
	(printf 'x' >"$M/notes.txt") 2>/dev/null
	assertNotEquals "only .ptx, .cubin, .fatbin" 0 $?
	(printf 'x' >"$M/a.b.ptx") 2>/dev/null
	assertNotEquals "module names have no dots" 0 $?
	mkdir "$M/sub" 2>/dev/null
	assertNotEquals "no directories in modules/" 0 $?
	mv "$M/k.ptx" "$M/j.ptx" 2>/dev/null
	assertNotEquals "modules are not renamed" 0 $?
	rm "$M/k.log" 2>/dev/null
	assertNotEquals "a log goes with its module" 0 $?
	rm "$M/k.ptx" || fail "rm module"
	assertEquals "" "$(ls "$M")"
	: >"$M/e.ptx"
	for _ in $(seq 50); do [ -e "$M/e.ptx" ] || break; sleep 0.05; done # RELEASE is asynchronous
	assertFalse "an empty module never loads, so it is not listed" "[ -e '$M/e.ptx' ]"
}

test_ctl_is_the_mounting_users_alone() {
	need setpriv || return 0
	unmount_vyrefs
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo 'clear x' >'$MNT/.vyre/ctl'" 2>/dev/null
	assertNotEquals "another user cannot dispatch" 0 $?
	assertEquals 600 "$(stat -c %a "$MNT/.vyre/ctl")"
}

. tests/shunit.sh
