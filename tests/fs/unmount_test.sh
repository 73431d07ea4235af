#!/usr/bin/env bash
# run.sh: long (a hundred mounts and unmounts, about a minute on a busy machine)
# A clean unmount ends promptly (issue 67, part 2; docs/survive.md "A clean
# unmount's end"): once unmounted, the process the mount started (with
# survive=on, the keeper) exits, every time, with every byte released and
# its standby ended; the mount point takes a new mount at once. The waits
# end at the exit itself (tests/fs/lib.sh wait_exit); VY_EXIT_BOUND is a
# bound against a hang, never a timing the test relies on.
. tests/fs/lib.sh

ROUNDS=${VY_UNMOUNT_ROUNDS:-100}

# The log says the mount released every byte: the exact baseline alone,
# the daemon's own check beside other suites on one GPU.
released_in() {
	if [ "${VY_TEST_GPU_SHARED:-0}" = 1 ]; then
		grep -qE 'unmounted .*: (device memory back to baseline|device [0-9]+ has [0-9]+ bytes free)' "$1"
	else
		grep -q 'device memory back to baseline' "$1"
	fi
}

# Mount, write, wait for the keeper's standby (so its end is part of each
# unmount), unmount: ROUNDS times in a row, each exit within the bound.
test_a_clean_unmount_ends_every_time_a_hundred_in_a_row() {
	local i good=0 log
	for i in $(seq "$ROUNDS"); do
		mount_vyrefs || { fail "mount $i failed"; return; }
		printf 'round %d' "$i" >"$MNT/f" || fail "write, round $i"
		wait_for "round $i: the standby" standby_settled || return
		log=$VY_LOG
		unmount_vyrefs # fails the test past VY_EXIT_BOUND
		if [ "$VY_STATUS" = 0 ] && released_in "$log"; then
			good=$((good + 1))
		else
			fail "round $i: exit status $VY_STATUS; its log: $(tail -n 5 "$log")"
			drop_log
			return
		fi
		drop_log
	done
	assertEquals "clean unmounts that exited, released" "$ROUNDS" "$good"
}

# A user's umount, then a new mount at the same point at once (before the
# old process has ended): the new one mounts, is empty, serves; the old
# one exits 0 with every byte released.
test_a_new_mount_at_the_same_point_works_at_once_after_umount() {
	mount_vyrefs || return
	local dir=$MNT old=$VY_PID old_log=$VY_LOG old_daemon=$VY_DAEMON
	echo one >"$dir/f"
	wait_for "the standby" standby_settled || return
	if [ "$(id -u)" = 0 ]; then umount "$dir"; else fusermount3 -u "$dir"; fi || { fail "umount"; return; }
	VY_LOG=$(mktemp "${VY_LOG_DIR:-/tmp}/vyrefs-log.XXXXXX") || return 1
	env --default-signal=INT "$VYREFS" -f -o "backend=$backend,host_memory=1G" "$dir" 2>"$VY_LOG" &
	VY_PID=$!
	wait_for "the new mount at $dir" vyrefs_live "$dir" || return
	assertFalse "the new mount does not show the old one's file" "[ -e '$dir/f' ]"
	echo two >"$dir/g"
	assertEquals "the new mount serves" two "$(cat "$dir/g")"
	assertNotEquals "a new daemon serves" "$old_daemon" "$(stat_of pid)"
	wait_exit "$old" "$VY_EXIT_BOUND" || fail "the old mount's process did not exit within $VY_EXIT_BOUND s"
	assertEquals "the old mount's exit status" 0 "$VY_STATUS"
	assertTrue "the old mount released every byte" "released_in '$old_log'"
	assertTrue "the new mount is still there" "vyrefs_live '$dir'"
	[ -n "${VY_LOG_DIR:-}" ] || rm -f "$old_log"
}

. tests/shunit.sh
