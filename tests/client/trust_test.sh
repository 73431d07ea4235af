#!/usr/bin/env bash
# The daemon's side of issue 25 ("trust"): what an unprivileged local user
# ("mallory", uid 65534) can make the daemon do through its socket. Each
# test replays one finding of the attack run with tests/client/vyattack (the
# socket's framing spoken by hand, so libvyrefs's own checks hide nothing)
# against a root mount with allow_other on this backend, and asserts the
# refusal the contract names (errno and a Fix), that nothing leaked, that
# the victim's bytes are as they were, and that the daemon is the same
# process with its fds and memory back within bounds while root's maps and
# copies keep working. Findings 4, 5 and 13 are the client's (client/).
. tests/fs/lib.sh
VYMAP=${BUILD}/tests/client/vymap
MALLORY=65534

oneTimeSetUp() {
	# The attacker's binary where mallory can run it; her own files in a
	# directory of hers; root's secrets beside it, 0600.
	TT=$(mktemp -d /tmp/vyrefs-trust.XXXXXX)
	chmod 755 "$TT"
	cp "$BUILD/tests/client/vyattack" "$TT/vyattack"
	chmod 755 "$TT/vyattack"
	mkdir "$TT/m"
	chown "$MALLORY:$MALLORY" "$TT/m"
	head -c 3000000 /dev/urandom >"$TT/probe"
	chmod 644 "$TT/probe"
}

oneTimeTearDown() {
	rm -rf "$TT"
}

setUp() {
	mount_attacked "allow_other=on" || { fail "mount"; return 1; }
}

tearDown() {
	[ -n "${ATTACKER:-}" ] && kill "$ATTACKER" 2>/dev/null && wait "$ATTACKER" 2>/dev/null
	ATTACKER=""
	second_gone
	[ -n "$MNT" ] && chattr -a -i "$MNT"/* 2>/dev/null
	unmount_vyrefs
	if [ -n "$VY_LOG" ] && [ -z "${VY_KEEP_LOGS:-}" ]; then rm -f "$VY_LOG"; fi
	VY_LOG=""
	rm -f "$TT"/out* "$TT"/m/*
}

# ---- helpers ---------------------------------------------------------------

# mount_attacked OPTIONS: mount, open to everyone, and note the daemon's
# fds and RSS to come back to.
mount_attacked() {
	mount_vyrefs "$1" || return 1
	chmod 1777 "$MNT"
	note_baseline
}

# note_baseline: the daemon's fds and RSS now, before the attack (each
# file of the mount holds fds of its memory: taken after the test's own
# files are made).
note_baseline() {
	BASE_FDS=$(fd_count)
	BASE_RSS=$(rss_kb)
}

remount() {
	unmount_vyrefs
	rm -f "$VY_LOG"
	mount_attacked "$1"
}

as_mallory() { setpriv --reuid=$MALLORY --regid=$MALLORY --clear-groups "$@"; }
attack() { as_mallory "$TT/vyattack" "$@"; }
# runs_as PID UID COMM: the process is COMM, with that real and effective uid.
runs_as() {
	[ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$3" ] &&
		awk -v u="$2" '$1 == "Uid:" { exit !($2 == u && $3 == u) }' "/proc/$1/status" 2>/dev/null
}

fd_count() { ls "/proc/$VY_DAEMON/fd" 2>/dev/null | wc -l; }
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$VY_DAEMON/status" 2>/dev/null; }

# A file of mallory's in the mount: BYTES of the letter m.
mallory_file() { # NAME BYTES
	as_mallory sh -c "head -c $2 /dev/zero | tr '\\0' m >'$MNT/$1'" || fail "mallory's file $1"
}

# assertDaemonSane SLACK_KB: the daemon is the process that mounted, it
# serves, its fds are back to what they were (connections end a little
# after the client: waited for, at most 10 s) and its RSS grew by at most
# SLACK_KB.
assertDaemonSane() {
	assertTrue "the daemon (pid $VY_DAEMON) lives" "kill -0 $VY_DAEMON"
	daemon_alive "$MNT" || fail "no vyrefs process serves $MNT"
	assertContains "its socket" "$(cat "$MNT/.vyre/socket" 2>&1)" "$VY_DAEMON"
	local n
	for _ in $(seq 200); do
		n=$(fd_count)
		[ "$n" -le $((BASE_FDS + 4)) ] && break
		sleep 0.05
	done
	assertTrue "the daemon's fds back: $n, $BASE_FDS before" "[ $n -le $((BASE_FDS + 4)) ]"
	n=$(rss_kb)
	assertTrue "the daemon's RSS ${n:-?} kB, $BASE_RSS kB before (+$1)" "[ -n '$n' ] && [ $n -le $((BASE_RSS + $1)) ]"
}

# assertOthersWork: root maps a file and copies into and out of the mount
# by the daemon (not the plain fallback), byte-exact.
assertOthersWork() {
	timeout 20 truncate -s 1M "$MNT/root-map" || fail "root's file"
	assertEquals "root maps" "1048576 $([ "$backend" = host ] && echo -1 || echo 0)" "$(timeout 20 "$VYMAP" info "$MNT/root-map" 2>&1)"
	local out way="(by the daemon, around FUSE"
	daemon_sees "$TT" || way="(plain read and write" # a chroot's root: the daemon cannot judge it (EXDEV)
	out=$(timeout 20 "$VYREFS" cp -v "$TT/probe" "$MNT/root-cp" 2>&1)
	assertContains "root's cp in, $way" "$out" "$way"
	rm -f "$TT/back"
	out=$(timeout 20 "$VYREFS" cp -v "$MNT/root-cp" "$TT/back" 2>&1)
	assertContains "root's cp out, $way" "$out" "$way"
	cmp -s "$TT/probe" "$TT/back" || fail "root's copy is not byte-exact"
	rm -f "$MNT/root-map" "$MNT/root-cp" "$TT/back"
}

# assertZerosPastEof WHAT OUTPUT: vyattack's dump saw bytes past the file's
# end, all of them zero, and no secret.
assertZerosPastEof() {
	local past nonzero
	read -r past nonzero <<<"$(echo "$2" | sed -n 's/^past-eof bytes=\([0-9]*\) nonzero=\([0-9]*\).*/\1 \2/p')"
	assertTrue "$1: memory past its end was looked at: $2" "[ '${past:-0}' -gt 0 ]"
	assertEquals "$1: nonzero bytes past its end: $2" 0 "${nonzero:-none}"
	assertNotContains "$1: no secret" "$2" "SECRET"
}

# assertRefused OUTPUT ERRNO: a refusal with that errno and a Fix.
assertRefused() {
	assertContains "refused with $2: $1" "$1" "refused $2: "
	assertContains "a Fix: $1" "$1" "(Fix: "
}

# wait_for FILE TEXT: until FILE holds TEXT, at most 30 s.
wait_for() {
	for _ in $(seq 600); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "no '$2' in $1 within 30 s: $(cat "$1" 2>/dev/null)"
	return 1
}

# ---- one test per finding --------------------------------------------------

# 1. An O_PATH fd reads nothing: (a) root's 0600 file of the mount as the
# mount's side of COPY out into mallory's file; (b) root's 0600 file
# outside the mount as the source of COPY into mallory's file of the mount.
# Both EACCES; her files lack the secret.
test_1_o_path_fd_reads_nothing() {
	mkdir -m 755 "$MNT/rootdir"
	echo "SECRET-ROOT-KEY-1-in-the-mount" >"$MNT/rootdir/secret"
	chmod 600 "$MNT/rootdir/secret"
	as_mallory touch "$TT/m/out"
	echo "SECRET-ROOT-KEY-1-outside" >"$TT/secret"
	chmod 600 "$TT/secret"
	mallory_file m1 4096
	before=$(sum_of "$MNT/m1")
	note_baseline
	out=$(attack "$MNT" copy-out "$MNT/rootdir/secret" O_PATH "$TT/m/out" O_WRONLY)
	assertRefused "$out" EACCES
	assertNotContains "(a) nothing came out" "$(cat "$TT/m/out")" "SECRET"
	out=$(attack "$MNT" copy-into "$MNT/m1" O_RDWR "$TT/secret" O_PATH)
	assertRefused "$out" EACCES
	assertEquals "(b) her file as it was" "$before" "$(sum_of "$MNT/m1")"
	assertDaemonSane 16384
	assertOthersWork
}

# 2. A mapping holds its file's bytes and zeros: after a deleted 4 MiB
# secret, a 5-byte file's mapping and a 2.5 MiB file's second piece show
# only zeros past the end of the file.
test_2_mapping_past_eof_is_zeros() {
	host_memfd || return 0
	yes SECRET-ROOT-KEY-2 | head -c 4M >"$MNT/secret"
	chmod 600 "$MNT/secret"
	rm "$MNT/secret"
	printf hello >"$MNT/tiny"
	chmod 666 "$MNT/tiny"
	note_baseline
	out=$(attack "$MNT" map-fd "$MNT/tiny" O_RDWR dump)
	assertContains "$out" "reply OK"
	assertContains "$out" "content: hello"
	assertZerosPastEof "the 5-byte file" "$out"
	yes SECRET-ROOT-KEY-2 | head -c 4M >"$MNT/secret"
	rm "$MNT/secret"
	head -c 2621440 /dev/zero | tr '\0' a >"$MNT/half"
	note_baseline
	out=$("$TT/vyattack" "$MNT" map-fd "$MNT/half" O_RDWR dump)
	assertContains "$out" "reply OK"
	assertZerosPastEof "the 2.5 MiB file's second piece" "$out"
	assertDaemonSane 65536
	assertOthersWork
}

# 3. The memory handed out cannot hurt the daemon: ftruncate of the
# received memfd (grow and shrink) fails with EPERM, and every file still
# reads back.
test_3_received_memfd_is_sealed() {
	host_memfd || return 0
	head -c 3000 /dev/urandom >"$MNT/a"
	cp "$MNT/a" "$TT/a"
	printf hello >"$MNT/tiny"
	chmod 666 "$MNT/tiny"
	note_baseline
	out=$(attack "$MNT" map-fd "$MNT/tiny" O_RDWR truncate)
	assertContains "$out" "reply OK"
	assertContains "grow refused: $out" "$out" "ftruncate grow: EPERM"
	assertContains "shrink refused: $out" "$out" "ftruncate 0: EPERM"
	assertEquals "hello" "$(timeout 10 cat "$MNT/tiny")"
	timeout 10 cmp -s "$TT/a" "$MNT/a" || fail "another file reads back"
	assertDaemonSane 16384
	assertOthersWork
}

# 6. A stalling client fd blocks nobody. A FIFO is no regular file: EINVAL
# at once. A file of a second vyrefs mount whose daemon is stopped, as the
# source of a COPY into a file root shares: once the copy waits on it,
# root's write to that file and stat of the mount complete (each within
# `timeout 5`) and root maps and copies other files; after the second
# daemon is killed, the copy has failed and the mount unmounts (within
# `timeout 20`).
test_6_stalling_client_fd_blocks_nobody() {
	mkfifo -m 666 "$TT/fifo"
	mallory_file m6 4096
	note_baseline
	out=$(timeout 10 setpriv --reuid=$MALLORY --regid=$MALLORY --clear-groups \
		"$TT/vyattack" "$MNT" copy-into "$MNT/m6" O_RDWR "$TT/fifo" "O_RDONLY|O_NONBLOCK")
	assertNotEquals "a FIFO does not hang the copy" 124 $?
	assertRefused "$out" EINVAL
	rm -f "$TT/fifo"

	mount_second
	head -c 8M /dev/urandom >"$MNT2/src"
	chmod 644 "$MNT2/src"
	head -c 8M /dev/zero | tr '\0' r >"$MNT/shared"
	chmod 666 "$MNT/shared"
	note_baseline
	# Only the attacker holds the fd: a close of it (a FUSE flush) would
	# wait for the stopped daemon, in any process.
	(exec 7<"$MNT2/src" && kill -STOP "$PID2" && exec setpriv --reuid=$MALLORY --regid=$MALLORY --clear-groups \
		"$TT/vyattack" "$MNT" copy-into "$MNT/shared" O_RDWR fd:7 - >"$TT/out6" 2>&1) &
	ATTACKER=$!
	# The copy has reached the stalled file: a thread of the daemon (or of
	# a child of it) waits on the second mount's answer.
	waiting=""
	for _ in $(seq 200); do
		waiting=$(fuse_waiters "$VY_DAEMON")
		[ -n "$waiting" ] && break
		sleep 0.05
	done
	assertNotNull "the copy reached the stalled fd" "$waiting"
	STUCK=""
	completes 5 dd if=/dev/zero of="$MNT/shared" bs=4096 count=1 conv=notrunc,fsync status=none
	assertEquals "root's write to the file completes" 0 $?
	completes 5 stat "$MNT"
	assertEquals "stat of the mount completes" 0 $?
	completes 5 grep -q '^copy_timeouts ' "$MNT/.vyre/stats"
	assertEquals "stats count abandoned copies (copy_timeouts)" 0 $?
	assertOthersWork
	kill -9 "$PID2"
	for p in $STUCK; do
		timeout 20 tail --pid="$p" -f /dev/null || fail "a command stuck on the mount did not end"
	done
	timeout 20 tail --pid="$ATTACKER" -f /dev/null
	assertNotEquals "the attacker got its answer" 124 $?
	ATTACKER=""
	assertNotContains "the copy did not succeed: $(cat "$TT/out6")" "$(cat "$TT/out6")" "reply OK"
	assertEquals "root's write is there" "0000" "$(timeout 5 head -c 2 "$MNT/shared" | od -An -tx1 | tr -d ' \n')"
	assertDaemonSane 65536
	second_gone
	timeout 20 fusermount3 -u "$MNT"
	assertEquals "the mount unmounts" 0 $?
	timeout 20 tail --pid="$VY_PID" -f /dev/null
	assertEquals "the daemon exits" 0 $?
}

# 7. The daemon is no deputy for /proc: COPY into from mallory's fd of
# /proc/1/stat is refused (EPERM) and her file keeps its bytes; COPY out of
# her file into her own process's oom_score_adj is refused and leaves it.
test_7_proc_fds_are_refused() {
	mallory_file m7 4096
	before=$(sum_of "$MNT/m7")
	as_mallory sh -c "printf -- '-1000\n' >'$MNT/m7adj'"
	note_baseline
	out=$(attack "$MNT" copy-into "$MNT/m7" O_RDWR /proc/1/stat O_RDONLY)
	assertRefused "$out" EPERM
	assertEquals "her file as it was" "$before" "$(sum_of "$MNT/m7")"
	setpriv --reuid=$MALLORY --regid=$MALLORY --clear-groups sleep 60 &
	victim=$!
	# Hers once setpriv has run sleep (before, its /proc files are root's).
	for _ in $(seq 600); do runs_as "$victim" "$MALLORY" sleep && break; sleep 0.05; done
	runs_as "$victim" "$MALLORY" sleep || { fail "the victim is not mallory's sleep within 30 s"; return; }
	out=$(attack "$MNT" copy-out "$MNT/m7adj" O_RDONLY "/proc/$victim/oom_score_adj" O_WRONLY)
	assertRefused "$out" EPERM
	assertEquals "oom_score_adj as it was" 0 "$(cat "/proc/$victim/oom_score_adj")"
	kill "$victim"
	wait "$victim" 2>/dev/null
	assertDaemonSane 16384
	assertOthersWork
}

# 8. chattr +a and +i hold: MAP and COPY into through an fd opened for
# writing (with O_APPEND on +a; opened before +i) are refused with EPERM,
# as is a ctl fill (which works on a plain file); the bytes stay.
test_8_append_only_and_immutable_hold() {
	need chattr || return 0
	head -c 4096 /dev/urandom >"$TT/src8"
	chmod 644 "$TT/src8"
	mallory_file plain 4096
	printf 'fill plain 7\n' >"$MNT/.vyre/ctl" || fail "ctl fill of a plain file"
	assertEquals "ctl fill works on a plain file" 4096 "$(tr -d '\007' <"$MNT/plain" | wc -c | xargs expr 4096 -)"
	mallory_file ma 4096
	mallory_file mi 4096
	exec 7<>"$MNT/mi"
	chattr +a "$MNT/ma" || fail "chattr +a"
	chattr +i "$MNT/mi" || fail "chattr +i"
	before=$(sum_of "$MNT/ma")
	note_baseline
	out=$(attack "$MNT" map-fd "$MNT/ma" "O_RDWR|O_APPEND")
	assertRefused "MAP of +a: $out" EPERM
	out=$(attack "$MNT" copy-into "$MNT/ma" "O_RDWR|O_APPEND" "$TT/src8" O_RDONLY)
	assertRefused "COPY into +a: $out" EPERM
	out=$(attack "$MNT" map-fd fd:7 -)
	assertRefused "MAP of +i: $out" EPERM
	out=$(attack "$MNT" copy-into fd:7 - "$TT/src8" O_RDONLY)
	assertRefused "COPY into +i: $out" EPERM
	exec 7<&-
	for f in ma mi; do
		printf 'fill %s 7\n' "$f" >"$MNT/.vyre/ctl" 2>/dev/null
		assertNotEquals "ctl fill of $f fails" 0 $?
	done
	assertEquals "+a keeps its bytes" "$before" "$(sum_of "$MNT/ma")"
	assertEquals "+i keeps its bytes" "$before" "$(sum_of "$MNT/mi")"
	chattr -a -i "$MNT/ma" "$MNT/mi"
	assertDaemonSane 16384
	assertOthersWork
}

# 9. An fd flood from a user who cannot reach the mount (no allow_other;
# she has the socket's name as from /proc/net/unix): 256 unfinished
# messages of 128 fds each. While she holds them the daemon's fds stay under
# 1024 more than before, root maps and copies, and within 25 s the daemon
# has dropped them (a deadline for a whole message).
test_9_fd_flood_is_bounded() {
	remount "" || { fail "mount without allow_other"; return 1; }
	sock=$(cat "$MNT/.vyre/socket")
	as_mallory ls "$MNT" >/dev/null 2>&1
	assertNotEquals "mallory cannot reach the mount" 0 $?
	setpriv --reuid=$MALLORY --regid=$MALLORY --clear-groups "$TT/vyattack" "$sock" flood-fds 256 60 >"$TT/out9" 2>&1 &
	ATTACKER=$!
	wait_for "$TT/out9" '^ready' || return
	high=$(fd_count)
	assertTrue "the daemon's fds under the flood: $high, $BASE_FDS before" "[ $high -le $((BASE_FDS + 1024)) ]"
	assertOthersWork
	n=$(fd_count)
	for _ in $(seq 500); do
		n=$(fd_count)
		[ "$n" -le $((BASE_FDS + 4)) ] && break
		sleep 0.05
	done
	assertTrue "unfinished messages dropped while she holds them: $n fds, $BASE_FDS before" "[ $n -le $((BASE_FDS + 4)) ]"
	assertDaemonSane 65536
}

# 10. 256 idle connections and 2000 more tries from mallory lock nobody
# out: root maps and copies by the daemon while she holds them, and the
# log grows by at most 20 lines.
test_10_idle_connections_lock_nobody_out() {
	lines=$(wc -l <"$VY_LOG")
	setpriv --reuid=$MALLORY --regid=$MALLORY --clear-groups "$TT/vyattack" "$MNT" idle-conns 300 2000 60 >"$TT/out10" 2>&1 &
	ATTACKER=$!
	wait_for "$TT/out10" '^ready' || return
	assertOthersWork
	added=$(($(wc -l <"$VY_LOG") - lines))
	assertTrue "the log grew by $added lines (at most 20): $(tail -n 3 "$VY_LOG")" "[ $added -le 20 ]"
	kill "$ATTACKER"
	wait "$ATTACKER" 2>/dev/null
	ATTACKER=""
	assertDaemonSane 65536
}

# 11. Metadata is budgeted: 2000 symlinks of mallory's with 4000-byte
# targets take 2000 inodes and at least their bodies' bytes in df; hard
# links count against max_inodes (100): past it, link fails with ENOSPC.
test_11_symlinks_and_hard_links_count() {
	# Symlink targets count in xattr_budget (the daemon's memory for
	# metadata): with 4 MiB of it, 4,000-byte targets stop near 1,000.
	remount "allow_other=on,xattr_budget=4M" || { fail "mount with xattr_budget=4M"; return 1; }
	as_mallory mkdir "$MNT/links"
	read -r iused0 <<<"$(df --output=iused "$MNT" | tail -n 1)"
	target=$(head -c 4000 /dev/zero | tr '\0' x)
	err=$(as_mallory perl -e 'for (1..2000) { symlink($ARGV[0], "$ARGV[1]/$_") or die "symlink $_: $!\n" }' "$target" "$MNT/links" 2>&1)
	assertContains "symlinks stop at the budget: $err" "$err" "No space left on device"
	made=$(find "$MNT/links" -type l | wc -l)
	assertEquals "df -i counts each" "$made" $(($(df --output=iused "$MNT" | tail -n 1) - iused0))
	assertTrue "about 4 MiB of targets: $made" "[ $made -ge 1000 ] && [ $made -le 1049 ]"
	assertDaemonSane 65536
	# Hard links past a file's first count against max_inodes, as on tmpfs.
	remount "allow_other=on,max_inodes=100" || { fail "mount with max_inodes=100"; return 1; }
	mallory_file h 1
	note_baseline
	err=$(as_mallory perl -e 'for (1..150) { link("$ARGV[0]/h", "$ARGV[0]/h$_") or die "link $_: $!\n" }' "$MNT" 2>&1)
	assertContains "links stop at max_inodes: $err" "$err" "No space left on device"
	assertEquals "df -i is full" 0 "$(df --output=iavail "$MNT" | tail -n 1 | tr -d ' ')"
	assertDaemonSane 65536
	# Then root needs an inode to show the rest works (finding 14: no
	# per-user quota, as on tmpfs).
	rm -f "$MNT"/h?*
	assertOthersWork
}

# 12. MAP needs O_RDWR: mallory's write-only fd of root's 0622 drop box,
# her O_RDONLY and O_PATH fds, are refused with EACCES; nothing of the
# file comes back.
test_12_map_needs_read_and_write() {
	echo "DROPBOX-SECRET-12" >"$MNT/drop"
	chmod 622 "$MNT/drop"
	note_baseline
	echo "PUBLIC-12" >"$MNT/pub"
	chmod 644 "$MNT/pub"
	for try in "drop O_WRONLY" "drop O_PATH" "pub O_RDONLY"; do
		set -- $try
		out=$(attack "$MNT" map-fd "$MNT/$1" "$2" dump 2>&1)
		assertRefused "$try: $out" EACCES
		assertNotContains "$try: nothing of the file came back" "$out" "content:"
	done
	assertEquals "DROPBOX-SECRET-12" "$(cat "$MNT/drop")"
	assertDaemonSane 16384
	assertOthersWork
}

# Issue 67 (edges) 4: a reader may map a file read-only, and the fds she
# is handed let her read only: no reopen for writing through /proc (the
# memory's file is 0600, the daemon's), no writable mapping, no write, no
# chmod back, no hole punched, no seal. Her bytes are the file's; the file
# is as it was. A read-only MAP still needs a readable fd; an unknown flag
# is refused. (Host backend: the cuda backend refuses read-only MAPs,
# tests/gpu/gpu_map_test.sh.)
test_12b_a_readers_memory_cannot_be_written() {
	[ "$backend" = host ] || { skip_test "the cuda backend maps no file read-only"; return; }
	head -c 3000000 /dev/urandom >"$TT/model"
	cp "$TT/model" "$MNT/model" && chmod 644 "$MNT/model" || fail "cp"
	head -c 3000000 /dev/zero >"$MNT/drop" && chmod 622 "$MNT/drop"
	note_baseline
	out=$(attack "$MNT" map-fd "$MNT/model" O_RDONLY readonly escalate 2>&1)
	assertContains "$out" "reply OK"
	for way in "reopen-rdwr: EACCES" "mmap-shared-write: EACCES" "mprotect-write: EACCES" "pwrite: EBADF" \
		"fchmod: EPERM" "fallocate: EBADF" "add-seals: EPERM" "setfl-rdwr: EBADF"; do
		assertEquals "$way: once for each of her fds" "$(echo "$out" | grep -c '^reopen-rdwr: ')" \
			"$(echo "$out" | grep -cxF "$way")"
	done
	assertNotContains "no way to write: $out" "$out" ": OK"
	cmp -s "$TT/model" "$MNT/model" || fail "the file changed"
	out=$(attack "$MNT" map-fd "$MNT/drop" O_WRONLY readonly dump 2>&1)
	assertRefused "a write-only fd: $out" EACCES
	assertNotContains "nothing of the file came back" "$out" "content:"
	out=$(attack "$MNT" map-fd "$MNT/model" O_RDONLY mapflags=6 2>&1)
	assertRefused "an unknown flag: $out" EINVAL
	assertDaemonSane 16384
	assertOthersWork
}

# Issue "survive 2", item 1: a request id the state's loader refuses (bit
# 63 set, or 0), sent by mallory on a connection that maps her own file of
# a survive=on mount, ends that connection before anything is kept: keeping
# goes on (kept_failures 0), and after a takeover root's file and hers are
# there, with their bytes. (Kept, it emptied the mount at the next death.)
test_13_a_request_id_the_loader_refuses_keeps_the_mount() {
	remount "allow_other=on,survive=on" || { fail "mount"; return; }
	head -c 3000000 /dev/urandom >"$TT/root.bin"
	cp "$TT/root.bin" "$MNT/root.bin" && chmod 600 "$MNT/root.bin"
	as_mallory sh -c 'head -c 3000000 /dev/zero > "$1/hers"' - "$MNT" || fail "her file"
	for id in 0x8000000000000001 0xffffffffffffffff 0; do
		out=$(VYATTACK_UNIQUE=$id attack "$MNT" map-fd "$MNT/hers" O_RDWR 2>&1)
		assertEquals "request id $id: the connection ends" closed "$out"
	done
	assertEquals "keeping goes on" 0 "$(stat_of kept_failures)"
	assertContains "$(cat "$VY_LOG")" "sent request id 0x8000000000000001 (0 and bit 63 are not a client's)"
	old=$(stat_of pid)
	kill -9 "$old"
	for _ in $(seq 1200); do # (this suite's wait_for waits for a file's text)
		serving_pid_not "$old" && standby_settled && break
		sleep 0.05
	done
	serving_pid_not "$old" || { fail "no successor within 60 s: $(tail -n 5 "$VY_LOG")"; return; }
	cmp -s "$TT/root.bin" "$MNT/root.bin" || fail "root's file after the takeover"
	assertEquals "her file after the takeover" 3000000 "$(stat -c %s "$MNT/hers")"
	assertEquals 0 "$(stat_of kept_failures)"
}

# Framing: a second HELLO gets an error reply (then the connection ends);
# a message with more fds than its opcode takes (MAP 1, COPY 2, SYNC 0)
# ends the connection, and the daemon keeps none of the fds.
# Issue "survive 2", item 5: a COPY acts on her fd with her credentials.
# Out of the mount into another user's writable set-id file (opened
# without O_TRUNC, so her open kept the bits): the bits go, as her own
# write would drop them; past her RLIMIT_FSIZE: refused, nothing written.
# Into a root 6777 file of the mount: the bits go too.
test_14_copies_write_as_their_client() {
	need_daemon_sees "$TT" || return 0 # the COPYs' other files are there
	mallory_file mal 65536
	: >"$TT/setid"
	chown 1:1 "$TT/setid"
	chmod 6777 "$TT/setid"
	out=$(attack "$MNT" copy-out "$MNT/mal" O_RDONLY "$TT/setid" O_WRONLY)
	assertContains "$out" "copied 65536 of 65536"
	assertEquals "set-id bits gone, as her write(2) drops them" "777 65536" "$(stat -c '%a %s' "$TT/setid")"
	: >"$TT/m/limited"
	chown "$MALLORY:$MALLORY" "$TT/m/limited"
	out=$(as_mallory bash -c 'ulimit -f 16; exec "$0" "$@"' "$TT/vyattack" "$MNT" copy-out "$MNT/mal" O_RDONLY "$TT/m/limited" O_WRONLY 2>&1)
	assertContains "her file size limit" "$out" "your file size limit is 16384"
	assertEquals "nothing written" 0 "$(stat -c %s "$TT/m/limited")"
	head -c 65536 /dev/zero >"$MNT/root-setid"
	chmod 6777 "$MNT/root-setid"
	head -c 65536 /dev/urandom >"$TT/m/src"
	chmod 644 "$TT/m/src"
	out=$(attack "$MNT" copy-into "$MNT/root-setid" O_RDWR "$TT/m/src" O_RDONLY)
	assertContains "$out" "copied 65536 of 65536"
	assertEquals "her copy into root's set-id file drops its bits" 777 "$(stat -c %a "$MNT/root-setid")"
	cmp -s "$TT/m/src" "$MNT/root-setid" || fail "the bytes"
	# Root's own copy keeps them, as root's write(2) does.
	chmod 6777 "$MNT/root-setid"
	out=$("$TT/vyattack" "$MNT" copy-into "$MNT/root-setid" O_RDWR "$TT/m/src" O_RDONLY)
	assertEquals "root's copy keeps them" 6777 "$(stat -c %a "$MNT/root-setid")"
	rm -f "$TT/setid" "$MNT/root-setid" "$MNT/mal"
	assertDaemonSane 16384 # the cuda backend's first copy takes its pinned staging buffers (6.7 MB on the H100)
}

# Issue "edges", 4: COPY out's file size limit was read from
# /proc/PID/limits of the process that connected when the copy came;
# once that process had exited, none applied (under a hard ulimit -f of
# 1 MiB, 4 MiB were written through a child; here 16 KiB and 64 KiB). It is taken when the
# connection is made, from the very process (a pidfd), or the copy out
# is refused.
test_15_a_child_writes_under_the_limit_of_the_process_that_connected() {
	need_daemon_sees "$TT" || return 0
	mallory_file mal 65536
	: >"$TT/m/limited"
	chown "$MALLORY:$MALLORY" "$TT/m/limited"
	out=$(as_mallory bash -c 'ulimit -f 16 && VYATTACK_HANDOFF=1 exec "$0" "$@"' "$TT/vyattack" \
		"$MNT" copy-out "$MNT/mal" O_RDONLY "$TT/m/limited" O_WRONLY 2>&1)
	assertEquals "EOVERFLOW: $out" "refused EOVERFLOW: the copy would write 65536 bytes; your file size limit is 16384 (Fix: raise your file size limit (ulimit -f), or copy a smaller file)" "$out"
	assertEquals "nothing written" 0 "$(stat -c %s "$TT/m/limited")"
	rm -f "$MNT/mal"
	assertDaemonSane 16384
}

test_flood_hello_twice_and_extra_fds() {
	out=$(attack "$MNT" hello-twice)
	assertEquals "first HELLO" "reply OK" "$(echo "$out" | head -n 1)"
	assertContains "second HELLO: an error reply: $out" "$(echo "$out" | tail -n 1)" "refused "
	assertContains "second HELLO: a Fix: $out" "$out" "(Fix: "
	for case in "17 3" "20 5" "18 2" "19 128"; do
		out=$(attack "$MNT" extra-fds $case)
		assertNotContains "$case: $out" "$out" "reply OK"
		assertContains "$case: the connection ends: $out" "$out" "then closed"
	done
	assertDaemonSane 16384
	assertOthersWork
}

# ---- more helpers ------------------------------------------------------------

# The mapping's memory is a host memfd (mmap-able) only on the host backend.
host_memfd() {
	[ "$backend" = host ] || { skip_test "host memfds (tests/gpu has the GPU's)"; return 1; }
}

# mount_second: a second mount (MNT2, PID2), the globals left as they were.
mount_second() {
	local m=$MNT p=$VY_PID d=$VY_DAEMON l=$VY_LOG
	# survive=off: its daemon stopped or killed is the mount's (no keeper).
	# page_cache=off: a file written there keeps no pages across opens, so
	# a read through a later open waits on the daemon, never on what the
	# kernel happened to keep (a copy once completed from cached pages
	# after the daemon was killed, CI under load).
	mount_vyrefs "allow_other=on,survive=off,page_cache=off" || { fail "second mount"; return 1; }
	MNT2=$MNT PID2=$VY_PID LOG2=$VY_LOG
	MNT=$m VY_PID=$p VY_DAEMON=$d VY_LOG=$l
}

second_gone() {
	[ -n "${PID2:-}" ] || return 0
	kill -9 "$PID2" 2>/dev/null
	wait "$PID2" 2>/dev/null
	umount -l "$MNT2" 2>/dev/null
	rmdir "$MNT2" 2>/dev/null
	rm -f "$LOG2"
	PID2=""
}

# Threads of PID and of its children waiting on a FUSE answer.
fuse_waiters() {
	local p
	for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		grep -l request_wait_answer /proc/"$p"/task/*/wchan 2>/dev/null
	done
}

# completes SECONDS CMD...: CMD, in the background, ends with status 0
# within SECONDS (polled; a command stuck in the kernel is left behind,
# its pid in STUCK, rather than waited for).
completes() {
	local limit=$1 done_file
	shift
	done_file=$(mktemp "$TT/done.XXXXXX")
	("$@" >/dev/null 2>&1; echo $? >"$done_file") &
	local pid=$!
	for _ in $(seq $((limit * 20))); do
		if [ -s "$done_file" ]; then
			wait "$pid"
			local rc
			rc=$(cat "$done_file")
			rm -f "$done_file"
			return "$rc"
		fi
		sleep 0.05
	done
	STUCK="$STUCK $pid"
	return 124
}

# Every test here mounts as root with allow_other and acts as another user.
only_as_root "a root mount with allow_other, attacked as another user"

. tests/shunit.sh
