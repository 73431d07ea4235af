#!/usr/bin/env bash
# Install what building and testing vyrefs needs, where it is missing
# (Debian/Ubuntu; apt needs root). Safe to run again: it only installs what
# it does not find. The CUDA toolkit's headers (cuda.h) are not a package
# here: they are looked for under CUDA_HOME (default /usr/local/cuda), and
# without them the cuda backend is left out of the build.
set -u

missing=()
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
have_pc fuse3 || missing+=(libfuse3-dev)
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
have_pc inih || missing+=(libinih-dev)
have_pc libxxhash || missing+=(libxxhash-dev)
command -v clang >/dev/null 2>&1 || missing+=(clang)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# numpy for the mapping suite (tests/client): Debian's python3 and its numpy
{ python3 -c 'import numpy' || /usr/bin/python3 -c 'import numpy'; } >/dev/null 2>&1 || missing+=(python3-numpy)
command -v getfattr >/dev/null 2>&1 || missing+=(attr)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
command -v fio >/dev/null 2>&1 || missing+=(fio) # the bench's smoke run
if [ -z "${SHUNIT2:-}" ] || [ ! -r "${SHUNIT2}" ]; then
	[ -r /usr/bin/shunit2 ] || missing+=(shunit2)
fi

if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "vyrefs: missing packages: ${missing[*]} (Fix: sudo apt-get install ${missing[*]}, or run make test as root)" >&2
		exit 1
	fi
	echo "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Install from the lists at hand; refresh them only if that fails.
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/vyrefs-apt.log 2>&1; then
		apt-get update -q >>/tmp/vyrefs-apt.log 2>&1
		if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/vyrefs-apt.log 2>&1; then
			tail -n 20 /tmp/vyrefs-apt.log >&2
			echo "vyrefs: could not install ${missing[*]} (Fix: see /tmp/vyrefs-apt.log; check the apt sources)" >&2
			exit 1
		fi
	fi
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
if command -v clang >/dev/null 2>&1 && ! fuzzer_links; then
	major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
	if [ "$(id -u)" = 0 ] && [ -n "$major" ]; then
		echo "installing: libclang-rt-$major-dev"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "libclang-rt-$major-dev" \
			>>/tmp/vyrefs-apt.log 2>&1 || echo "note: no libFuzzer runtime: make fuzz will not build (Fix: apt-get install libclang-rt-$major-dev)"
	else
		echo "note: no libFuzzer runtime for clang (Fix: sudo apt-get install libclang-rt-${major:-NN}-dev)"
	fi
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -r "$cuda_home/include/cuda.h" ]; then
	echo "note: no $cuda_home/include/cuda.h: building without the cuda backend (the host backend works; set CUDA_HOME to a CUDA toolkit to build it in)"
fi
exit 0
