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

# Issue 67 (edges) 4, the window itself: the daemon dies under a copy;
# its successor, held until then (KILLSHIM_HOLD), answers the client's
# read of .vyre/socket and dies right after (KILLSHIM_AT=replied on a
# READ), before the client reaches the socket it named. The copy waits for
# the next successor and ends with every byte (it failed: "has exited").
test_a_copy_waits_past_a_successor_that_dies_before_it_is_reached() {
	need_daemon_sees "$T" || return 0
	mount_shimmed KILLSHIM_IO="$T/arm" KILLSHIM_HOLD="$T/hold" KILLSHIM_OPCODE=15 KILLSHIM_NAME= \
		KILLSHIM_ARM="$T/arm2" KILLSHIM_AT=replied || { fail "mount"; return; }
	: >"$T/arm"
	timeout 120 "$VYREFS" cp -v "$T/src" "$MNT/dst" >"$T/out" 2>&1 &
	local cp=$!
	wait_for "the daemon died and its successor waits" test -e "$T/hold.held" || return
	: >"$T/arm2"
	: >"$T/hold"
	wait "$cp"
	local rc=$?
	assertEquals "the copy succeeds: $(cat "$T/out")" 0 $rc
	assertContains "by the daemon" "$(cat "$T/out")" "(by the daemon, around FUSE, 25165824 of 25165824 bytes moved"
	assertFalse "the successor answered, and died" "[ -e '$T/arm2' ]"
	assertEquals "takeovers" 2 "$(stat_of takeovers)"
	cmp "$T/src" "$MNT/dst" || fail "the copy differs"
}

# Issue 67 (edges) 4: under kills every 0.1 to 0.3 s, `vyrefs cp` gave up
# in 6 of 666 copies ("has exited", "closed the connection"), each some
# milliseconds before a successor answered: a copy waits for the successor
# as a FUSE request does. VY_COPY_KILLS_COPIES (60) copies in and out of
# 3 MiB while the daemon serving is killed every 0.1 to 0.3 s (a successor
# whose takeover took longer dies at its first answer, the stats read
# that names it: the window where a client has read its socket's name and
# not yet reached it): none fails, each byte exact, every kill taken over.
# Every other daemon serves 0.1 to 0.3 s from its first answer before its
# kill, however long its takeover took: on cuda a standby's start (its
# context) outlasts 0.3 s, and with every successor killed at its first
# answer a copy cannot go on, and gives up after 8 takeovers (7 of 120
# gave up on an H100; that this was the cause is likely, not shown).
test_copies_wait_for_the_successor_under_kills_every_tenth_of_a_second() {
	need_daemon_sees "$T" || return 0
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	make_data "$T/data" $((3 << 20)) 5
	(
		n=0
		while [ ! -e "$T/stop" ]; do
			sleep "0.$((RANDOM % 3 + 1))"
			old=$(stat_of pid)
			[ -n "$old" ] || { echo "no pid in .vyre/stats" >>"$T/errors"; break; }
			[ $((n % 2)) = 1 ] && sleep "0.$((RANDOM % 3 + 1))"
			kill -9 "$old" && n=$((n + 1))
		done
		echo "$n" >"$T/kills"
	) &
	local killer=$! i failed=0
	for i in $(seq "${VY_COPY_KILLS_COPIES:-60}"); do
		timeout 120 "$VYREFS" cp "$T/data" "$MNT/c" 2>>"$T/errors" || failed=$((failed + 1))
		timeout 120 "$VYREFS" cp "$MNT/c" "$T/back" 2>>"$T/errors" || failed=$((failed + 1))
		cmp -s "$T/data" "$T/back" || echo "copy $i differs" >>"$T/errors"
		rm -f "$T/back"
	done
	touch "$T/stop"
	wait "$killer"
	assertEquals "no copy failed: $(head -c 1500 "$T/errors" 2>/dev/null)" 0 "$failed"
	assertEquals "every copy exact, every successor found" "" "$(head -c 1500 "$T/errors" 2>/dev/null)"
	local kills
	kills=$(cat "$T/kills")
	assertTrue "the daemon was killed under the copies ($kills)" "[ $kills -ge 10 ]"
	wait_for "the last kill taken over" stat_is takeovers "$kills"
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
