# Shared by the fs suites: mount vyrefs on a fresh directory, read its
# stats, unmount and check it released every device byte. Sourced.
. tests/skip.sh
VYREFS=${VYREFS:-build/vyrefs}
BUILD=${BUILD:-build}
backend=${VY_TEST_BACKEND:-host}
MNT=""
VY_PID=""    # the process mount_vyrefs started (with survive=on, the keeper)
VY_DAEMON="" # the daemon serving the mount (.vyre/stats' pid)
VY_LOG=""

# vyrefs_live DIR: DIR is a vyrefs mount (the last mounted there, as
# /proc/self/mountinfo lists it) whose daemon answers.
vyrefs_live() {
	local fstype
	fstype=$(awk -v m="$1" '$5 == m { for (i = 7; i < NF; i++) if ($i == "-") { t = $(i + 1); break } } END { print t }' /proc/self/mountinfo)
	[ "$fstype" = fuse.vyrefs ] && [ -r "$1/.vyre/stats" ]
}

# Where MNT points after a failed mount: a path under no directory, so a
# write meant for the mount fails (ENOENT) instead of landing elsewhere.
VY_NO_MOUNT=/nonexistent/vyrefs-mount-failed

# mount_vyrefs [OPTIONS]: in the foreground, in the background, so the test
# has its pid and its log; returns once the mount is there. Its log goes to
# VY_LOG_DIR (tests/run.sh: under the run's logs), else /tmp.
mount_vyrefs() {
	local logdir=${VY_LOG_DIR:-/tmp}
	mkdir -p "$logdir" || { MNT=$VY_NO_MOUNT; return 1; }
	MNT=$(mktemp -d /tmp/vyrefs-mnt.XXXXXX) || { MNT=$VY_NO_MOUNT; return 1; }
	chmod 755 "$MNT"
	VY_LOG=$(mktemp "$logdir/vyrefs-log.XXXXXX") || VY_LOG=/dev/null
	local opts="backend=$backend,host_memory=1G${1:+,$1}"
	# Beside other suites on one GPU (tests/run.sh): a budget, so df and a
	# fill see this mount's room, not what the others left free.
	[ "${VY_TEST_GPU_SHARED:-0}" = 1 ] && [[ $opts != *resident_budget=* ]] && opts+=",resident_budget=4G"
	# A background job starts with SIGINT ignored; a terminal's would not.
	env --default-signal=INT "$VYREFS" -f -o "$opts" "$MNT" 2>"$VY_LOG" &
	VY_PID=$!
	# Until it serves or ends, up to 60 s (six suites side by side on one
	# GPU start their CUDA contexts together): a bound, not a timing.
	for _ in $(seq 1200); do
		if vyrefs_live "$MNT"; then
			VY_DAEMON=$(stat_of pid)
			[ -n "$VY_DAEMON" ] && return 0
			echo "mount failed: no pid in $MNT/.vyre/stats"
			return 1
		fi
		kill -0 "$VY_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "mount failed:"; cat "$VY_LOG"
	if ! mountpoint -q "$MNT"; then
		kill "$VY_PID" 2>/dev/null
		rmdir "$MNT" 2>/dev/null
		MNT=$VY_NO_MOUNT
	fi
	return 1
}

# How long an unmounted mount's process may take to exit before the test
# fails (docs/survive.md "A clean unmount's end"): a bound against a hang,
# not a timing; the wait ends at the exit itself.
VY_EXIT_BOUND=${VY_EXIT_BOUND:-120}

# wait_exit PID SECONDS: wait for the child PID to exit, woken by its exit
# (bash's wait: SIGCHLD, no polling), at most SECONDS; its status in
# VY_STATUS. Past the bound a watchdog kills it and wait_exit returns 1.
# The watchdog is a session of its own (setsid: in a script its pid is
# its group's), ended whole once the wait is over, by SIGKILL: before its
# exec it is still a copy of this shell, whose traps (shunit2's TERM)
# must not run there. It never signals this shell, and holds none of its
# fds (a $(...) around wait_exit ends when it does). A child reaped
# already, or not this shell's, gives status 127 at once.
wait_exit() {
	local pid=$1 flag dog late
	flag=$(mktemp /tmp/vyrefs-late.XXXXXX) || return 1
	setsid bash -c 'sleep "$1" && kill -9 "$2" 2>/dev/null && echo late >"$3"' _ "$2" "$pid" "$flag" \
		</dev/null >/dev/null 2>&1 &
	dog=$!
	wait "$pid" 2>/dev/null
	VY_STATUS=$?
	kill -KILL -- -"$dog" 2>/dev/null || kill -KILL "$dog" 2>/dev/null
	wait "$dog" 2>/dev/null
	late=$(cat "$flag")
	rm -f "$flag"
	[ -z "$late" ]
}

# unmount_vyrefs: unmount, wait for the process, and check its last words.
unmount_vyrefs() {
	[ -n "$MNT" ] || return 0
	fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	wait_exit "$VY_PID" "$VY_EXIT_BOUND" ||
		fail "vyrefs (pid $VY_PID) did not exit within $VY_EXIT_BOUND s of the unmount (Fix: see its log, $VY_LOG)"
	[ "$MNT" = "$VY_NO_MOUNT" ] || rmdir "$MNT" 2>/dev/null
	MNT=""
}

# daemon_alive PATTERN: a vyrefs process whose command line matches is
# running. pgrep (procps) answers 0 (found) or 1 (none); anything else (no
# pgrep, a bad pattern) fails the test and counts as alive, so a "daemon is
# gone" check cannot pass without having looked.
daemon_alive() {
	pgrep -f "$1" >/dev/null 2>&1
	local rc=$?
	[ $rc -le 1 ] && return $rc
	fail "pgrep -f '$1' failed (exit $rc) (Fix: install procps)"
	return 0
}

# wait_gone PATTERN: wait for the daemon matching it to exit, up to
# VY_EXIT_BOUND s (a process not this shell's child: looked at every 50 ms).
wait_gone() {
	for _ in $(seq $((VY_EXIT_BOUND * 20))); do
		daemon_alive "$1" || return 0
		sleep 0.05
	done
	return 1
}

# wait_for WHAT COMMAND...: wait for an event, up to 60 s (a bound against
# a hang, not a timing the test relies on); fails the test when it never came.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 1200); do
		"$@" && return 0
		sleep 0.05
	done
	fail "$what: not within 60 s"
	return 1
}

# as_nobody CMD...: CMD as uid and gid 65534. The binaries just built are
# copied first where that user can read them (a clone under /root is 0700
# to it, and vymap's RUNPATH points into the clone); NOBODY_VYREFS and
# NOBODY_VYMAP name the copies, whose library LD_LIBRARY_PATH finds first;
# NOBODY_PYTHONPATH, the Python module's copy.
# Call nobody_bins once first (not in a $(...)), so they are kept.
nobody_bins() {
	[ -n "${NOBODY_DIR:-}" ] && return 0
	NOBODY_DIR=$(mktemp -d /tmp/vyrefs-bin.XXXXXX) || return 1
	chmod 755 "$NOBODY_DIR"
	cp "$VYREFS" "$NOBODY_DIR/vyrefs" && cp "$BUILD/libvyrefs.so" "$BUILD/tests/client/vymap" "$NOBODY_DIR/" ||
		{ fail "cannot copy the binaries to $NOBODY_DIR"; return 1; }
	# The Python module and the client suites' helpers too (NOBODY_PYTHONPATH).
	mkdir -p "$NOBODY_DIR/py" && cp -r client/python/vyrefs tests/client/*.py "$NOBODY_DIR/py/" &&
		chmod -R a+rX "$NOBODY_DIR" || { fail "cannot copy the Python module to $NOBODY_DIR"; return 1; }
	NOBODY_PYTHONPATH=$NOBODY_DIR/py
	NOBODY_VYREFS=$NOBODY_DIR/vyrefs NOBODY_VYMAP=$NOBODY_DIR/vymap
}
as_nobody() {
	LD_LIBRARY_PATH=${NOBODY_DIR:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# others_opt: allow_other=on where this user may give it (root, or
# user_allow_other in /etc/fuse.conf), so tests as another user can reach
# the mount; else nothing (those tests skip: need setpriv).
others_opt() {
	if [ "$(id -u)" = 0 ] || grep -qs '^[[:space:]]*user_allow_other' /etc/fuse.conf; then echo allow_other=on; fi
}

# exited PID: the process has exited (a child is a zombie until waited for).
exited() {
	[ ! -e /proc/"$1" ] || [ "$(awk '{ print $3 }' /proc/"$1"/stat 2>/dev/null)" = Z ]
}

# The value of a key in .vyre/stats.
stat_of() {
	awk -v k="$1" '$1 == k { print $2 }' "$MNT/.vyre/stats"
}

# survive=on: a daemon other than pid $1 serves the mount (its successor).
serving_pid_not() { [ "$(stat_of pid)" != "$1" ] && [ -n "$(stat_of pid)" ]; }

# survive=on: the keeper's standby successor is ready (its devices open),
# or the mount has none (survive_standby=off). Its CUDA context holds
# device memory, so df's free and available figures are taken with it there.
standby_settled() {
	local s
	grep -qx 'survive = off' "$MNT/.vyre/config" && return 0 # no keeper
	grep -qx 'survive_standby = off' "$MNT/.vyre/config" && return 0
	s=$(stat_of standby_pid)
	[ -n "$s" ] && [ "$s" != 0 ]
}

# The pid of the mount's launcher process (the daemon's child), or nothing. Pure
# bash: a fork per process would take seconds on a busy machine.
launcher_pid() {
	local stat line pid
	local -a f
	for stat in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$stat" || continue
		read -r -a f <<<"${line##*) }" # state ppid ...
		if [ "${f[1]}" = "$VY_DAEMON" ]; then
			pid=${stat#/proc/}
			echo "${pid%/stat}"
		fi
	done
}

# Bytes of pseudo-random data, the same for the same seed.
make_data() { # FILE BYTES SEED
	head -c "$2" /dev/urandom >"$1"
}

# The ordinal of the device that holds FILE (user.vyre.device).
dev_of() { getfattr -n user.vyre.device --only-values "$1" 2>/dev/null; }

# Where the attr tools are missing (the GPU machine's image), the three forms
# the suites use, through python3's os.*xattr.
if ! command -v setfattr >/dev/null && command -v python3 >/dev/null; then
	setfattr() { # setfattr -n NAME -v VALUE FILE, or -x NAME FILE
		if [ "$1" = -x ] && [ $# = 3 ]; then
			python3 -c 'import os, sys
try:
    os.removexattr(sys.argv[2], sys.argv[1])
except OSError as e:
    sys.exit("setfattr: %s: %s" % (sys.argv[2], e.strerror))' "$2" "$3"
			return
		fi
		[ "$1" = -n ] && [ "$3" = -v ] && [ $# = 5 ] || { echo "setfattr (tests/fs/lib.sh): only -n NAME -v VALUE FILE or -x NAME FILE" >&2; return 2; }
		python3 -c 'import os, sys
try:
    os.setxattr(sys.argv[3], sys.argv[1], sys.argv[2].encode())
except OSError as e:
    sys.exit("setfattr: %s: %s" % (sys.argv[3], e.strerror))' "$2" "$4" "$5"
	}
	getfattr() { # getfattr -n NAME --only-values FILE
		[ "$1" = -n ] && [ "$3" = --only-values ] && [ $# = 4 ] || { echo "getfattr (tests/fs/lib.sh): only -n NAME --only-values FILE" >&2; return 2; }
		python3 -c 'import os, sys
try:
    sys.stdout.write(os.getxattr(sys.argv[2], sys.argv[1]).decode())
except OSError as e:
    sys.exit("getfattr: %s: %s" % (sys.argv[2], e.strerror))' "$2" "$4"
	}
fi
# The sha256 of FILE.
sum_of() { sha256sum <"$1" | cut -d' ' -f1; }

# start_readers FILE SUM ROUNDS BAD: two readers in the background, each
# reading FILE whole from the daemon (O_DIRECT) ROUNDS times and noting in
# BAD any read whose sha256 is not SUM; their pids in `readers` (wait for
# those, not for every job: the daemon is one too).
start_readers() {
	local file=$1 want=$2 rounds=$3 bad=$4 r
	readers=()
	for r in 1 2; do
		(for _ in $(seq "$rounds"); do
			got=$(dd if="$file" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1)
			[ "$got" = "$want" ] || echo "reader $r: $got" >>"$bad"
		done) &
		readers+=($!)
	done
}

# A clean exit that released every device byte. Beside other suites on one
# GPU the free figure moves with theirs: the exit status (a buffer the
# store could not free fails it) and the daemon's own count; the suites
# that run alone check the exact baseline.
assertReleased() {
	assertEquals "exit status" 0 "$VY_STATUS"
	if [ "${VY_TEST_GPU_SHARED:-0}" = 1 ]; then
		assertTrue "the daemon checked its device memory at unmount" \
			"grep -qE 'unmounted .*: (device memory back to baseline|device [0-9]+ has [0-9]+ bytes free)' '$VY_LOG'"
	else
		assertContains "$(cat "$VY_LOG")" "device memory back to baseline"
	fi
}

tearDown() {
	unmount_vyrefs
	drop_log
}

# drop_log: remove the mount's log unless it is kept (VY_KEEP_LOGS, or under
# tests/run.sh's log dir, which keeps every log of the run).
drop_log() {
	if [ -n "$VY_LOG" ] && [ -z "${VY_KEEP_LOGS:-}" ] && [ -z "${VY_LOG_DIR:-}" ]; then rm -f "$VY_LOG"; fi
	VY_LOG=""
}

# mount_tmpfs: a tmpfs of 64M at $TMPFS to compare with (root only). One
# that did not mount leaves no directory for a test to fill (it would be
# /tmp's disk).
mount_tmpfs() {
	need_root "it compares with a tmpfs it mounts" || return 1
	TMPFS=$(mktemp -d /tmp/vyrefs-tmpfs.XXXXXX) || return 1
	# nodev,nosuid: as libfuse mounts vyrefs
	if ! mount -t tmpfs -o size=64m,nodev,nosuid tmpfs "$TMPFS"; then
		fail "tmpfs"
		rmdir "$TMPFS"
		TMPFS=/nonexistent/vyrefs-tmpfs
		return 1
	fi
	chmod 755 "$TMPFS"
}

# only_as_root REASON: called last in a suite whose every test needs root:
# as a user each test is skipped with REASON, and nothing is set up.
only_as_root() {
	[ "$(id -u)" = 0 ] && return 0
	local t
	for t in $(declare -F | awk '$3 ~ /^test_/ { print $3 }'); do
		eval "$t() { need_root '$1' || return 0; }"
	done
	oneTimeSetUp() { :; }
	oneTimeTearDown() { :; }
	setUp() { :; }
	tearDown() { :; }
}
