#!/usr/bin/env bash
# CUDA C modules (.cu) compiled by NVRTC when closed (ctl/nvrtc.c): the
# compile works without a GPU, the second copy and a remount compile nothing
# (the cache, in stats), a syntax error fails the copy with the compiler's
# line in NAME.log, and without NVRTC the refusal says what to install.
. tests/fs/lib.sh

nvrtc_here() {
	ls "${CUDA_HOME:-/usr/local/cuda}"/lib64/libnvrtc.so* >/dev/null 2>&1 || ldconfig -p | grep -q libnvrtc
}

setUp() {
	CACHE=$(mktemp -d)
	XDG_CACHE_HOME=$CACHE mount_vyrefs || fail "mount"
	CU=$CACHE/saxpy.cu
	cat >"$CU" <<'CU'
// vyrefs: -DSCALE=2
extern "C" __global__ void saxpy(float *y, const float *x, float a, unsigned n)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = SCALE * a * x[i] + y[i];
}
CU
}

tearDown() {
	rm -rf "$CACHE"
	unmount_vyrefs
	if [ -n "$VY_LOG" ] && [ -z "${VY_KEEP_LOGS:-}" ]; then rm -f "$VY_LOG"; fi
	VY_LOG=""
}

test_cu_compiles_and_the_cache_spares_the_second() {
	nvrtc_here || { skip_test "needs NVRTC (the CUDA toolkit's libnvrtc)"; return 0; }
	cp "$CU" "$MNT/.vyre/modules/saxpy.cu" || fail "compile"
	assertEquals "saxpy.cu saxpy.log" "$(ls "$MNT/.vyre/modules" | tr '\n' ' ' | sed 's/ $//')"
	assertEquals 1 "$(stat_of compiles)"
	assertEquals 0 "$(stat_of compile_cache_hits)"
	assertEquals "its PTX is kept" 1 "$(ls "$CACHE/vyrefs/nvrtc" | wc -l)"
	cp "$CU" "$MNT/.vyre/modules/again.cu" || fail "second copy"
	assertEquals "the same source: no compile" 1 "$(stat_of compiles)"
	assertEquals 1 "$(stat_of compile_cache_hits)"
	unmount_vyrefs
	XDG_CACHE_HOME=$CACHE mount_vyrefs || fail "remount"
	cp "$CU" "$MNT/.vyre/modules/saxpy.cu" || fail "after a remount"
	assertEquals "a remount compiles nothing" 0 "$(stat_of compiles)"
	assertEquals 1 "$(stat_of compile_cache_hits)"
	sed -i 's/SCALE=2/SCALE=3/' "$CU"
	cp "$CU" "$MNT/.vyre/modules/saxpy.cu" || fail "other options"
	assertEquals "other options: a compile" 1 "$(stat_of compiles)"
}

test_syntax_error_fails_the_copy_with_its_line() {
	nvrtc_here || { skip_test "needs NVRTC (the CUDA toolkit's libnvrtc)"; return 0; }
	printf 'extern "C" __global__ void k(float *y)\n{\n\ty[0] = oops;\n}\n' >"$MNT.bad.cu"
	err=$(cp "$MNT.bad.cu" "$MNT/.vyre/modules/bad.cu" 2>&1)
	assertNotEquals "cp fails" 0 $?
	assertContains "$err" "Invalid argument"
	log=$(cat "$MNT/.vyre/modules/bad.log")
	assertContains "$log" 'bad.cu(3): error: identifier "oops" is undefined'
	assertFalse "not listed" "[ -e '$MNT/.vyre/modules/bad.cu' ]"
	assertContains "$(grep bad "$VY_LOG")" "(Fix: "
	rm -f "$MNT.bad.cu"
}

test_without_nvrtc_the_refusal_says_what_to_install() {
	unmount_vyrefs
	VYREFS_NVRTC=/nonexistent/libnvrtc.so XDG_CACHE_HOME=$CACHE mount_vyrefs || fail "mount"
	err=$(cp "$CU" "$MNT/.vyre/modules/saxpy.cu" 2>&1)
	assertNotEquals 0 $?
	log=$(cat "$MNT/.vyre/modules/saxpy.log")
	assertContains "$log" "no NVRTC"
	assertContains "$(grep saxpy "$VY_LOG")" "Fix: install NVRTC"
}

. "${SHUNIT2:-/usr/bin/shunit2}"
