#!/usr/bin/env bash
# survive=on (docs/survive.md, "vyrefs cp"): `vyrefs cp` through the
# daemon's death copies again, whole, with the successor, and ends with
# every byte; with no successor it fails and leaves no file that looks
# complete. The daemon dies at its first read or write of the copy's other
# file (killshim.c, KILLSHIM_IO), the copy half done.
. tests/fs/lib.sh
. tests/survive/lib.sh
T=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-copy.XXXXXX) || return 1
	[ -r "$SHIM" ] || { echo "no $SHIM (Fix: make)"; return 1; }
	make_data "$T/src" $((24 << 20)) 1
}

tearDown() {
	unmount_vyrefs
	drop_log
	rm -rf "$T"
}

# mount_killing [ADOPT]: a survive=on mount whose daemon dies at its first
# pread or pwrite once $T/arm exists; ADOPT: every successor dies too.
mount_killing() {
	if [ -n "$1" ]; then
		mount_shimmed KILLSHIM_IO="$T/arm" KILLSHIM_ADOPT=1
	else
		mount_shimmed KILLSHIM_IO="$T/arm"
	fi
}

# copied FROM TO: vyrefs cp -v, its status, and what it said.
copied() {
	: >"$T/arm"
	timeout 120 "$VYREFS" cp -v "$1" "$2" >"$T/out" 2>&1
}

test_a_copy_in_goes_on_with_the_successor() {
	need_daemon_sees "$T" || return 0
	mount_killing || { fail "mount"; return; }
	local old
	old=$(stat_of pid)
	copied "$T/src" "$MNT/dst"
	local rc=$?
	assertEquals "the copy succeeds: $(cat "$T/out")" 0 $rc
	assertContains "by the daemon" "$(cat "$T/out")" "(by the daemon, around FUSE, 25165824 of 25165824 bytes moved"
	assertFalse "the daemon died under it" "[ -e '$T/arm' ]"
	assertNotEquals "a successor serves" "$old" "$(stat_of pid)"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
	cmp "$T/src" "$MNT/dst" || fail "the copy differs"
}

# Issue "survive 2" item 8b: the dead daemon left the client's file
# O_DIRECT (its status flags are the client's open file's); the successor
# reads a size that is no multiple of 4096 in whole blocks all the same.
test_a_copy_in_of_an_odd_size_goes_on_with_the_successor() {
	need_daemon_sees "$T" || return 0
	mount_killing || { fail "mount"; return; }
	make_data "$T/odd" $(((24 << 20) + 1234)) 2
	copied "$T/odd" "$MNT/odd"
	local rc=$?
	assertEquals "the copy succeeds: $(cat "$T/out")" 0 $rc
	assertContains "by the daemon: $(cat "$T/out")" "$(cat "$T/out")" "(by the daemon, around FUSE, 25167058 of 25167058 bytes moved"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
	cmp "$T/odd" "$MNT/odd" || fail "the copy differs"
}

test_a_copy_out_goes_on_with_the_successor() {
	need_daemon_sees "$T" || return 0
	mount_killing || { fail "mount"; return; }
	cp "$T/src" "$MNT/f" || { fail "cp in"; return; }
	local old
	old=$(stat_of pid)
	copied "$MNT/f" "$T/back"
	local rc=$?
	assertEquals "the copy succeeds: $(cat "$T/out")" 0 $rc
	assertContains "by the daemon" "$(cat "$T/out")" "(by the daemon, around FUSE, 25165824 of 25165824 bytes moved"
	assertFalse "the daemon died under it" "[ -e '$T/arm' ]"
	assertNotEquals "a successor serves" "$old" "$(stat_of pid)"
	cmp "$T/src" "$T/back" || fail "the copy differs"
}

test_a_copy_with_no_successor_fails_and_leaves_no_whole_size_file() {
	need_daemon_sees "$T" || return 0
	mount_killing adopt || { fail "mount"; return; }
	copied "$T/src" "$MNT/dst"
	local rc=$?
	assertNotEquals "the copy fails" 0 $rc
	assertContains "saying the daemon exited" "$(cat "$T/out")" "vyrefs: the daemon of $MNT"
	assertFalse "the daemon died under it" "[ -e '$T/arm' ]"
}

. tests/shunit.sh
