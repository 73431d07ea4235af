# Sourced by the shunit2 suites: skip a test whose tools this machine lacks.
# The runner (tests/run.sh) counts a test that printed SKIPPED and failed
# nothing as skipped, not passed.

# skip_test REASON: skip the rest of this test's asserts.
skip_test() {
	echo "SKIPPED: $1"
	startSkipping
}

# need TOOL...: skip the test unless every tool is on PATH. setpriv here
# acts as another user, which only root can.
need() {
	local t
	for t in "$@"; do
		type -P "$t" >/dev/null 2>&1 || { skip_test "needs $t"; return 1; } # a program, not a stand-in (lib.sh)
		if [ "$t" = setpriv ] && [ "$(id -u)" != 0 ]; then
			skip_test "needs root (it acts as another user)"
			return 1
		fi
	done
}

# need_mount_ns: skip the test unless this process can make a private
# mount namespace (unshare -m): in a chroot whose / is not a mount point it
# cannot change the root's propagation.
need_mount_ns() {
	need unshare || return 1
	unshare -m true 2>/dev/null && return 0
	if mountpoint -q /; then
		skip_test "needs a private mount namespace (unshare -m: $(unshare -m true 2>&1 | head -n 1))"
	else
		skip_test "needs a private mount namespace, and / is not a mount point here (a chroot: bind-mount its root onto itself first)"
	fi
	return 1
}

# need_root WHY: skip the test unless run as root.
need_root() {
	[ "$(id -u)" = 0 ] || { skip_test "needs root ($1)"; return 1; }
}

# cuda_built_in: true when this vyrefs has the cuda backend, as the binary
# itself says (`--build-info`); fails the test when it cannot tell.
cuda_built_in() {
	local said
	said=$("$VYREFS" --build-info 2>&1 | sed -n 's/^cuda_backend \(yes\|no\)$/\1/p')
	if [ -z "$said" ]; then
		fail "vyrefs --build-info gives no cuda_backend line"
		return 2
	fi
	[ "$said" = yes ]
}

# cuda_driver_here: a CUDA driver (libcuda.so.1) is installed on this machine.
cuda_driver_here() {
	ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '
}

# assertNoCudaRefusal ERR: the refusal of backend=cuda on this build: no
# driver for a build with the cuda backend, no backend for one without it.
assertNoCudaRefusal() {
	if cuda_built_in; then
		assertContains "$1" "no CUDA driver"
		assertContains "$1" "(Fix: install the NVIDIA driver"
	else
		assertContains "$1" "this vyrefs was built without the CUDA backend"
		assertContains "$1" "(Fix: install the CUDA toolkit headers"
	fi
}

# daemon_sees DIR: true when DIR's filesystem is in /proc/self/mountinfo,
# so a mount's daemon can judge a file there and `vyrefs cp` it around
# FUSE; in a chroot whose / is not a mount point it is not (the copy goes
# the plain way, EXDEV). need_daemon_sees DIR skips the test then.
daemon_sees() {
	findmnt -n -T "$1" >/dev/null 2>&1
}
need_daemon_sees() {
	daemon_sees "$1" && return 0
	skip_test "the filesystem of $1 is not in /proc/self/mountinfo (a chroot whose / is not a mount point): the daemon cannot copy its files, vyrefs cp copies them the plain way (Fix: mount --bind the chroot's / onto itself first)"
	return 1
}
