#!/usr/bin/env bash
# survive=on (docs/survive.md, "Requests"): a request the daemon had made
# and kept but not answered when it died is answered by its successor with
# the kept reply, not run again. Each test kills the daemon (an LD_PRELOAD
# shim, killshim.c with KILLSHIM_AT=reply) as it is about to write the reply
# to one kind of request; the program that asked gets the answer it would
# have got, and the namespace has the change once. Run again instead (what
# the daemon did before), a mkdir would get EEXIST, an unlink ENOENT, and
# an open one handle too many.
. tests/fs/lib.sh
. tests/survive/lib.sh
T=""
OLD=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-resend.XXXXXX) || return 1
	[ -r "$SHIM" ] || { echo "no $SHIM (Fix: make)"; return 1; }
}

tearDown() {
	unmount_vyrefs
	drop_log
	rm -rf "$T"
}

# mount_killing OPCODE NAME: a survive=on mount whose daemon dies as it is
# about to answer the next request OPCODE carrying NAME (empty: any) once
# armed (arm).
mount_killing() {
	mount_shimmed KILLSHIM_OPCODE="$1" KILLSHIM_NAME="$2" KILLSHIM_ARM="$T/arm" KILLSHIM_AT=reply
}

arm() {
	OLD=$(stat_of pid)
	: > "$T/arm"
}

# run CMD...: the request under test; its status, and nothing on stderr.
run() {
	timeout 60 "$@" 2>"$T/err"
	assertEquals "$* succeeds" 0 $?
	assertEquals "$*: stderr" "" "$(cat "$T/err")"
}

# The daemon died at the reply and its successor answered with the kept one.
answered_by_successor() {
	assertFalse "the shim fired (it removes the arm)" "[ -e '$T/arm' ]"
	assertNotEquals "a successor serves" "$OLD" "$(stat_of pid)"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
	assertEquals "resends_answered" 1 "$(stat_of resends_answered)"
}

names() { ls -A "$MNT" | grep -v '^\.vyre$' | tr '\n' ' '; }

test_mkdir() {
	mount_killing 9 rs_d || { fail "mount"; return; }
	local links
	links=$(stat -c %h "$MNT")
	arm
	run mkdir "$MNT/rs_d"
	answered_by_successor
	assertEquals "one directory" "rs_d " "$(names)"
	assertEquals "the parent's links" $((links + 1)) "$(stat -c %h "$MNT")"
}

# Killed as it read the request, before anything was kept: the resend runs
# it anew, once.
test_mkdir_killed_before_kept_runs_anew() {
	mount_shimmed KILLSHIM_OPCODE=9 KILLSHIM_NAME=rs_d KILLSHIM_ARM="$T/arm" || { fail "mount"; return; }
	arm
	run mkdir "$MNT/rs_d"
	assertFalse "the shim fired" "[ -e '$T/arm' ]"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
	assertEquals "nothing to answer with" 0 "$(stat_of resends_answered)"
	assertEquals "one directory" "rs_d " "$(names)"
}

test_create_exclusive() {
	mount_killing 35 rs_f || { fail "mount"; return; }
	arm
	run python3 -c 'import os,sys; fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640); os.write(fd, b"abc"); os.close(fd)' "$MNT/rs_f"
	answered_by_successor
	assertEquals "one file" "rs_f " "$(names)"
	assertEquals "its bytes, written through the handle the dead daemon gave" abc "$(cat "$MNT/rs_f")"
	assertEquals "its mode" 640 "$(stat -c %a "$MNT/rs_f")"
	assertEquals "no handle left open" 0 "$(stat_of open_handles)"
}

test_mknod_symlink_link() {
	mount_killing 8 rs_p || { fail "mount"; return; }
	arm
	run mkfifo "$MNT/rs_p"
	answered_by_successor
	assertEquals "a fifo" "fifo" "$(stat -c %F "$MNT/rs_p")"
	unmount_vyrefs
	mount_killing 6 rs_l || { fail "mount"; return; }
	arm
	run ln -s target "$MNT/rs_l"
	answered_by_successor
	assertEquals "the link's target" target "$(readlink "$MNT/rs_l")"
	unmount_vyrefs
	mount_killing 13 rs_h || { fail "mount"; return; }
	echo x > "$MNT/f"
	arm
	run ln "$MNT/f" "$MNT/rs_h"
	answered_by_successor
	assertEquals "two names" "f rs_h " "$(names)"
	assertEquals "two links" 2 "$(stat -c %h "$MNT/f")"
}

test_unlink_rmdir_rename() {
	mount_killing 10 rs_u || { fail "mount"; return; }
	echo x > "$MNT/rs_u"
	arm
	run rm "$MNT/rs_u"
	answered_by_successor
	assertEquals "no name" "" "$(names)"
	unmount_vyrefs
	mount_killing 11 rs_r || { fail "mount"; return; }
	local links
	links=$(stat -c %h "$MNT")
	mkdir "$MNT/rs_r"
	arm
	run rmdir "$MNT/rs_r"
	answered_by_successor
	assertEquals "no directory" "" "$(names)"
	assertEquals "the parent's links" "$links" "$(stat -c %h "$MNT")"
	unmount_vyrefs
	mount_killing 12 rs_a || { fail "mount"; return; }
	echo moved > "$MNT/rs_a"
	arm
	run python3 -c 'import os,sys; os.rename(sys.argv[1], sys.argv[2])' "$MNT/rs_a" "$MNT/rs_b"
	answered_by_successor
	assertEquals "the new name alone" "rs_b " "$(names)"
	assertEquals "its bytes" moved "$(cat "$MNT/rs_b")"
}

test_xattr_create_and_remove() {
	mount_killing 21 user.rs || { fail "mount"; return; }
	echo x > "$MNT/f"
	arm
	run python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.rs", b"v1", os.XATTR_CREATE)' "$MNT/f"
	answered_by_successor
	assertEquals "the xattr" v1 "$(python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.rs").decode())' "$MNT/f")"
	unmount_vyrefs
	mount_killing 24 user.rs || { fail "mount"; return; }
	echo x > "$MNT/f"
	python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.rs", b"v1")' "$MNT/f"
	arm
	run python3 -c 'import os,sys; os.removexattr(sys.argv[1], "user.rs")' "$MNT/f"
	answered_by_successor
	assertEquals "no xattr" "[]" "$(python3 -c 'import os,sys; print([x for x in os.listxattr(sys.argv[1]) if x.startswith("user.")])' "$MNT/f")"
}

# An open answered twice would leave the first handle open for ever.
test_open_counts_one_handle() {
	mount_killing 14 "" || { fail "mount"; return; }
	echo abc > "$MNT/f"
	local before
	before=$(stat_of open_handles)
	arm
	run python3 -c 'import os,sys; fd = os.open(sys.argv[1], os.O_RDONLY); assert os.read(fd, 3) == b"abc"; os.close(fd)' "$MNT/f"
	answered_by_successor
	assertEquals "open handles as before" "$before" "$(stat_of open_handles)"
}

# write_some TAG: four writers at once (new workers start for them).
write_some() {
	local i pids=""
	for i in 1 2 3 4; do
		head -c 65536 /dev/zero > "$MNT/rb_$1_$i" &
		pids="$pids $!"
	done
	for i in $pids; do wait "$i"; done
}

# A request the kernel copies into a dying daemon's read buffer must reach
# the successor: the copy cannot fault a page in once the SIGKILL is
# pending (the kernel answers EIO: fio saw it across kills), so every
# buffer a survive=on daemon reads into is present (residentshim.c checks
# each read of /dev/fuse), in new workers and in the successor's.
test_read_buffers_present_across_a_kill() {
	local log=$T/resident n
	[ -r "$RESIDENT_SHIM" ] || { fail "no $RESIDENT_SHIM (Fix: make)"; return; }
	mount_shimmed LD_PRELOAD="$SHIM $RESIDENT_SHIM" RESIDENTSHIM_LOG="$log" || { fail "mount"; return; }
	write_some before
	kill_daemon || { fail "takeover"; return; }
	write_some after
	assertEquals "the successor has every file" 8 "$(ls "$MNT" | grep -c '^rb_')"
	n=$(grep -c '^checked ' "$log")
	assertTrue "reads of /dev/fuse were checked in both daemons ($n processes)" "[ $n -ge 2 ]"
	assertEquals "read buffers with pages missing" "" "$(grep '^missing' "$log")"
}

# A lookup answered twice would count one reference the kernel never forgets.
forgotten_all() {
	echo 3 > /proc/sys/vm/drop_caches
	[ "$(stat_of kernel_lookups)" = 0 ]
}

test_lookup_counts_once() {
	mount_killing 1 rs_f || { fail "mount"; return; }
	echo abc > "$MNT/rs_f"
	echo 3 > /proc/sys/vm/drop_caches
	arm
	run stat "$MNT/rs_f"
	answered_by_successor
	wait_for "every reference forgotten after drop_caches" forgotten_all
	assertEquals "no FORGET unmatched" 0 "$(stat_of forgets_unmatched)"
}

only_as_root_here() {
	[ "$(id -u)" = 0 ] || eval 'test_lookup_counts_once() { need_root "drop_caches" || return 0; }'
}
only_as_root_here

. tests/shunit.sh
