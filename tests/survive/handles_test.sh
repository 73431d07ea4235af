#!/usr/bin/env bash
# survive=on (docs/survive.md): what the kernel holds survives the daemon.
# A program's open files and directories read and write on through a
# SIGKILL of the daemon (their `fh` ids are taken back), an unlinked file
# held open lives until its last close, and the kernel's lookup counts are
# the successor's: dropping the kernel's caches forgets each one exactly.
. tests/fs/lib.sh
. tests/survive/lib.sh
HOLDER="python3 $PWD/tests/survive/holder.py"
T=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-handles.XXXXXX) || return 1
}

tearDown() {
	[ -n "$HPID" ] && kill "$HPID" 2>/dev/null
	HPID=""
	unmount_vyrefs
	drop_log
	rm -rf "$T"
}

ready() { [ -e "$T/ready" ] || ! kill -0 "$HPID" 2>/dev/null; }

# hold MODE: start the holder (tests/survive/holder.py) and wait until it
# holds what it opens.
hold() {
	$HOLDER "$1" "$MNT" "$T" > "$T/holder.out" 2>&1 &
	HPID=$!
	wait_for "the holder opens its files" ready || return 1
	[ -e "$T/ready" ] || { fail "the holder: $(cat "$T/holder.out")"; return 1; }
}

# let_go: the holder goes on; its verdict.
let_go() {
	touch "$T/go"
	wait "$HPID"
	local rc=$?
	HPID=""
	assertEquals "the holder: $(cat "$T/holder.out")" 0 "$rc"
	assertEquals "the holder's verdict" ok "$(cat "$T/holder.out")"
}

test_open_files_and_directories_read_and_write_on() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	hold files || return
	local handles
	handles=$(stat_of open_handles)
	assertTrue "the holder's file and directory are open" "[ $handles -ge 2 ]"
	kill_daemon || return
	[ "$(id -u)" = 0 ] && echo 3 > /proc/sys/vm/drop_caches # what is read next comes from the successor
	assertEquals "the same handles are open" "$handles" "$(stat_of open_handles)"
	let_go
	assertEquals "the holder's handles are released" 0 "$(stat_of open_handles)"
	assertEquals "the write landed" "after the death" "$(dd if="$MNT/f" bs=1 skip=100 count=15 status=none)"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
	assertNotContains "no handle was lost" "$(cat "$VY_LOG")" "cannot be taken back"
}

# Issue "survive 2" item 8c: an O_TMPFILE file open across a kill can be
# linked in after it (the successor knows it may be named).
test_tmpfile_links_in_after_a_kill() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	hold tmpfile || return
	kill_daemon || return
	let_go
	assertEquals "named" "$(ls "$MNT")"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
}

test_unlinked_open_file_lives_until_its_last_close() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	assertEquals "empty to begin with" 0 "$(stat_of resident_bytes)"
	hold unlinked || return
	local resident used
	resident=$(stat_of resident_bytes) used=$(stat -f -c '%f' "$MNT")
	assertTrue "the unlinked file's bytes are resident" "[ $resident -ge $((3 << 20)) ]"
	kill_daemon || return
	assertEquals "its bytes are still resident after the kill" "$resident" "$(stat_of resident_bytes)"
	assertEquals "df: its blocks still used" "$used" "$(stat -f -c '%f' "$MNT")"
	assertContains "the successor freed no inode" "$(cat "$VY_LOG")" "0 nameless inodes freed"
	let_go
	wait_for "its memory is freed at its last close" stat_is resident_bytes 0
	assertEquals "no handle is open" 0 "$(stat_of open_handles)"
}

# Every reference the kernel holds was counted by the daemon that gave it;
# the successor takes the counts over, so dropping the kernel's caches
# brings each inode's count to 0, with no FORGET for a reference it did not
# count. (kernel_lookups sums the inodes outside .vyre/, so reading it
# changes nothing; the FORGETs come in as the daemon reads them.)
forgotten_all() {
	echo 3 > /proc/sys/vm/drop_caches
	stat_is kernel_lookups 0
}

test_drop_caches_forgets_every_reference_after_a_kill() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	# Held open (O_PATH): another suite's drop_caches cannot take them.
	hold paths || return
	local before
	before=$(stat_of kernel_lookups)
	assertTrue "the kernel holds the 302 inodes: $before" "[ $before -ge 302 ]"
	kill_daemon || return
	assertTrue "the successor counts them too" "[ $(stat_of kernel_lookups) -ge 302 ]"
	let_go
	wait_for "every count comes to 0 after drop_caches" forgotten_all
	assertEquals "no FORGET found a reference it did not count" 0 "$(stat_of forgets_unmatched)"
	assertEquals "the files are all there" 300 "$(ls "$MNT/a/b" | wc -l)"
}

# A write acknowledged before the kill is in the file after it: with
# survive=on no write waits in the daemon's own memory (write-behind gathers
# into slots the keeper holds, fs/wbehind_keep.h).
test_acknowledged_write_survives_a_kill() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	assertContains "write-behind is on" "$(cat "$MNT/.vyre/config")" "write_behind = on"
	exec 3>"$MNT/f"
	printf 'acknowledged before the kill' >&3 # no close, no fsync: nothing settles it
	kill_daemon || { exec 3>&-; return; }
	# O_DIRECT: the daemon's bytes, not the kernel's page cache of the write.
	assertEquals "its bytes" "acknowledged before the kill" "$(dd if="$MNT/f" iflag=direct bs=4096 status=none)"
	exec 3>&-
	assertEquals "and after the close" "acknowledged before the kill" \
		"$(dd if="$MNT/f" iflag=direct bs=4096 status=none)"
}

# runs: stdin as runs of one byte ("y12288 x4096").
runs() {
	python3 -c 'import itertools, sys
print(" ".join("%c%d" % (k, len(list(g))) for k, g in itertools.groupby(sys.stdin.buffer.read())))'
}

# Writes gathered in write-behind slots reach their file through a kill,
# never copied by the dead daemon: the successor copies every slot, the
# older first, so where a newer slot grew over one whose copy was queued,
# the newer bytes win.
test_gathered_writes_survive_a_kill_in_their_order() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	# One process writes and holds the file open across the kill: any
	# close, even of a copy of its fd, would flush the slots first.
	python3 - "$MNT/f" "$T" > "$T/writer.out" 2>&1 <<'PY' &
import os, sys, time
f, t = sys.argv[1], sys.argv[2]
fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"x" * 8192, 8192)  # a slot of [8K, 16K)
for off in (0, 4096, 8192):  # a second from 0 queues the first, then grows over it
    os.pwrite(fd, b"y" * 4096, off)
open(t + "/ready", "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(t + "/go") and time.monotonic() < deadline:
    time.sleep(0.01)
os.close(fd)
PY
	HPID=$!
	wait_for "the writer writes" ready || return
	assertEquals "one slot's copy queued, the other gathering" 1 "$(stat_of wb_copies)"
	kill_daemon
	assertContains "the successor copied both" "$(cat "$VY_LOG")" "2 write-behind slots copied to their files (0 of"
	assertEquals "the newer bytes where they overlap" "y12288 x4096" \
		"$(dd if="$MNT/f" iflag=direct bs=16384 status=none | runs)"
	touch "$T/go"
	wait "$HPID"
	assertEquals "the writer: $(cat "$T/writer.out")" 0 $?
	HPID=""
	printf z | dd of="$MNT/f" bs=1 seek=20000 conv=notrunc status=none
	assertEquals "a write after the kill, gathered again (counted on from the dead daemon's 1)" 2 "$(stat_of wb_copies)"
	assertEquals "its byte" z "$(dd if="$MNT/f" iflag=direct bs=4096 skip=4 status=none | tr -d '\0')"
}

only_as_root_here() {
	[ "$(id -u)" = 0 ] || eval 'test_drop_caches_forgets_every_reference_after_a_kill() { need_root "drop_caches" || return 0; }'
}
only_as_root_here

. tests/shunit.sh
