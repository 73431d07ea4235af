#!/usr/bin/env bash
# Install what vyrefs needs, where it is missing (Debian/Ubuntu, apt).
#   scripts/install-deps.sh          build and mount: `make deps`
#   scripts/install-deps.sh test     also what `make test` and `make fuzz` use
# As root it runs apt-get; as a user with sudo, `sudo apt-get`; as a user
# without sudo it names the packages to ask an administrator for, in one
# line, and stops (`test`: goes on, the tests needing them skip). Safe to run
# again: it only installs what it does not find. The CUDA toolkit's headers
# (cuda.h) are not a package here: the Makefile looks for them under
# CUDA_HOME and says once when it builds without them.
set -u
mode=${1:-build}
case "$mode" in build|test) ;; *) echo "usage: scripts/install-deps.sh [build|test]" >&2; exit 2 ;; esac

missing=()
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
command -v cc >/dev/null 2>&1 || missing+=(gcc)
[ -r /usr/include/stdio.h ] || missing+=(libc6-dev) # only recommended by gcc
command -v make >/dev/null 2>&1 || missing+=(make)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
have_pc fuse3 || missing+=(libfuse3-dev)
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
have_pc inih || missing+=(libinih-dev)
have_pc libxxhash || missing+=(libxxhash-dev)
if [ "$mode" = test ]; then
	command -v clang >/dev/null 2>&1 || missing+=(clang)
	command -v python3 >/dev/null 2>&1 || missing+=(python3)
	# numpy for the mapping suite (tests/client): Debian's python3 and its numpy
	{ python3 -c 'import numpy' || /usr/bin/python3 -c 'import numpy'; } >/dev/null 2>&1 || missing+=(python3-numpy)
	# torch (CPU) for the attach suite: 141 MB, 38 s to install on Debian 12
	{ python3 -c 'import torch' || /usr/bin/python3 -c 'import torch'; } >/dev/null 2>&1 || missing+=(python3-torch)
	command -v getfattr >/dev/null 2>&1 || missing+=(attr)
	command -v setfacl >/dev/null 2>&1 || missing+=(acl)      # the POSIX ACL tests
	command -v rsync >/dev/null 2>&1 || missing+=(rsync)
	command -v pgrep >/dev/null 2>&1 || missing+=(procps)   # the daemon-gone checks
	command -v groff >/dev/null 2>&1 || missing+=(groff-base) # the man page check
	command -v fio >/dev/null 2>&1 || missing+=(fio)        # the bench's smoke run
	command -v ctags >/dev/null 2>&1 || missing+=(universal-ctags) # the layout check (tools/layout_check.py)
	command -v chattr >/dev/null 2>&1 || missing+=(e2fsprogs)   # chattr +i/+a (not in a minbase system)
	# file capabilities as on tmpfs; setcap is in /usr/sbin, on no user's PATH on Debian
	command -v setcap >/dev/null 2>&1 || [ -x /usr/sbin/setcap ] || [ -x /sbin/setcap ] || missing+=(libcap2-bin)
	if [ -z "${SHUNIT2:-}" ] || [ ! -r "${SHUNIT2}" ]; then
		[ -r /usr/bin/shunit2 ] || missing+=(shunit2)
	fi
fi

# apt_install PACKAGE...: as root or through sudo, with a line per package
# set up; the whole output goes to /tmp/vyrefs-apt.log.
apt_log=/tmp/vyrefs-apt.log
apt_get() { # ARGS...: apt-get install, its set-up packages shown, all logged
	"${run[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" 2>&1 |
		tee -a "$apt_log" | sed -un 's/^Setting up \([^ ]*\).*/  set up \1/p'
	return "${PIPESTATUS[0]}"
}
apt_install() {
	run=()
	[ "$(id -u)" = 0 ] || run=(sudo)
	local start=$SECONDS
	{ : >"$apt_log"; } 2>/dev/null || apt_log=$(mktemp /tmp/vyrefs-apt.XXXXXX.log) # root's, from an earlier run
	echo "installing with ${run[*]:+${run[*]} }apt-get: $* (log: $apt_log)"
	# Install from the lists at hand; refresh them only if that fails.
	if ! apt_get "$@"; then
		echo "  the package lists may be stale: apt-get update"
		"${run[@]}" apt-get update -q >>"$apt_log" 2>&1
		if ! apt_get "$@"; then
			tail -n 20 "$apt_log" >&2
			echo "vyrefs: could not install $* (Fix: see $apt_log; check the apt sources)" >&2
			return 1
		fi
	fi
	echo "installed in $((SECONDS - start)) s"
}

if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
		# No way to install: say what is missing in one line. The suites
		# still run; the tests that need a missing package skip, saying so.
		fix="ask an administrator to run: apt-get install --no-install-recommends ${missing[*]}"
		if [ "$mode" = test ]; then
			echo "vyrefs: missing packages: ${missing[*]}; the tests that need them are skipped (Fix: $fix)" >&2
			exit 0
		fi
		echo "vyrefs: missing packages: ${missing[*]} (Fix: $fix; then run this again)" >&2
		exit 1
	fi
	apt_install "${missing[@]}" || exit 1
fi

# `make fuzz` needs clang's libFuzzer runtime, which Debian only recommends.
fuzzer_links() {
	local dir
	dir=$(mktemp -d) || return 1
	printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$dir/f.c"
	clang -fsanitize=fuzzer "$dir/f.c" -o "$dir/f" >/dev/null 2>&1
	local rc=$?
	rm -rf "$dir"
	return $rc
}
if [ "$mode" = test ] && command -v clang >/dev/null 2>&1 && ! fuzzer_links; then
	major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
	if [ -n "$major" ] && { [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; }; then
		apt_install "libclang-rt-$major-dev" || echo "note: no libFuzzer runtime: make fuzz will not build (Fix: apt-get install libclang-rt-$major-dev)"
	else
		echo "note: no libFuzzer runtime for clang: make fuzz will not build (Fix: ask an administrator to run: apt-get install libclang-rt-${major:-NN}-dev)"
	fi
fi
exit 0
