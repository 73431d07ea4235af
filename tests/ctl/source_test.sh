#!/usr/bin/env bash
# CUDA C modules (.cu) compiled by NVRTC when closed (ctl/nvrtc.c): the
# compile works without a GPU, the second copy and a remount compile nothing
# (the cache, in stats), a syntax error fails the copy with the compiler's
# line in NAME.log, and without NVRTC the host backend keeps the source
# uncompiled while the cuda backend refuses it, saying what is missing. The
# std module compiles the same way on its first use; n=COUNT refusals.
. tests/fs/lib.sh

nvrtc_here() {
	ls "${CUDA_HOME:-/usr/local/cuda}"/lib64/libnvrtc.so* >/dev/null 2>&1 || ldconfig -p | grep -q libnvrtc
}

setUp() {
	CACHE=$(mktemp -d) || return 1
	XDG_CACHE_HOME=$CACHE mount_vyrefs || { fail "mount"; return 1; }
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
	drop_log
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
	XDG_CACHE_HOME=$CACHE mount_vyrefs || { fail "remount"; return 1; }
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

# The std module compiles on the host backend too (launches stay refused
# there; on cuda they run): once, on the first launch that names it, and its
# kernels are exactly the ones docs/ctl.md lists.
test_std_compiles_on_first_use_with_the_documented_kernels() {
	nvrtc_here || { skip_test "needs NVRTC (the CUDA toolkit's libnvrtc)"; return 0; }
	truncate -s 64 "$MNT/y"
	assertEquals "nothing compiled at mount" 0 "$(stat_of compiles)"
	err=$( (echo "launch std.fill_f32 n=16 y f32:1 u64:16" >"$MNT/.vyre/ctl") 2>&1)
	rc=$?
	if [ "$backend" = host ]; then
		assertNotEquals 0 $rc
		assertContains "$err" "Invalid argument"
		assertContains "$(tail -n 1 "$MNT/.vyre/log")" "launching needs the cuda backend"
	else
		assertEquals "the launch runs on the GPU: $err" 0 $rc
	fi
	assertEquals "compiled on first use" 1 "$(stat_of compiles)"
	echo "launch std.sum_f32 n=16 grid=auto y y u64:16" >"$MNT/.vyre/ctl" 2>/dev/null
	assertEquals "and only then" 1 "$(stat_of compiles)"
	assertEquals "std is not listed" "" "$(ls "$MNT/.vyre/modules")"
	ptx=$(ls "$CACHE"/vyrefs/nvrtc/*.ptx)
	assertEquals "one PTX kept" 1 "$(echo "$ptx" | wc -l)"
	kernels=$(sed -n 's/^\.visible \.entry \([a-z0-9_]*\)(.*/\1/p' $ptx | sort)
	documented=$(grep -o 'std\.[a-z0-9_]\+' docs/ctl.md | sed 's/^std\.//' | sort -u | grep -vx -e cu -e ptx)
	assertEquals "docs/ctl.md lists every std kernel" "$kernels" "$documented"
	assertTrue "many kernels" "[ $(echo "$kernels" | wc -l) -ge 40 ]"
	unmount_vyrefs
	XDG_CACHE_HOME=$CACHE mount_vyrefs || { fail "remount"; return 1; }
	truncate -s 64 "$MNT/y"
	echo "launch std.fill_f32 n=16 y f32:1 u64:16" >"$MNT/.vyre/ctl" 2>/dev/null
	assertEquals "a remount finds it in the cache" "0 1" "$(stat_of compiles) $(stat_of compile_cache_hits)"
}

test_std_without_nvrtc_says_what_is_missing() {
	unmount_vyrefs
	VYREFS_NVRTC=/nonexistent/libnvrtc.so XDG_CACHE_HOME=$CACHE mount_vyrefs || { fail "mount"; return 1; }
	truncate -s 64 "$MNT/y"
	err=$( (echo "launch std.fill_f32 n=16 y f32:1 u64:16" >"$MNT/.vyre/ctl") 2>&1)
	assertContains "$err" "Invalid argument"
	log=$(tail -n 1 "$MNT/.vyre/log")
	if [ "$backend" = host ]; then
		# NVRTC is not what is missing: the host backend keeps std's
		# source uncompiled, and the launch says what it needs.
		assertContains "$log" "launching needs the cuda backend"
		assertNotContains "$log" "NVRTC"
	else
		assertContains "$log" "the built-in module 'std': cannot compile std.cu: no NVRTC"
		assertContains "$log" "(Fix: install NVRTC"
	fi
	assertEquals 0 "$(stat_of compiles)"
}

# A .cu without NVRTC: the host backend keeps it, not compiled, as it keeps
# any module (README's first session copies one on any machine, and a
# fresh Debian has no NVRTC: it used to refuse the copy); the cuda backend
# refuses the copy, saying NVRTC is missing.
test_without_nvrtc_a_cu_module_is_kept_on_host_and_refused_on_cuda() {
	unmount_vyrefs
	VYREFS_NVRTC=/nonexistent/libnvrtc.so XDG_CACHE_HOME=$CACHE mount_vyrefs || { fail "mount"; return 1; }
	err=$(cp "$CU" "$MNT/.vyre/modules/saxpy.cu" 2>&1)
	local rc=$?
	if [ "$backend" = host ]; then
		assertEquals "the copy is kept: $err" 0 $rc
		assertEquals "listed" "saxpy.cu saxpy.log" "$(ls "$MNT/.vyre/modules" | tr '\n' ' ' | sed 's/ $//')"
		assertContains "its log says so" "$(cat "$MNT/.vyre/modules/saxpy.log")" "kept, not compiled"
		truncate -s 64 "$MNT/y"
		echo "launch saxpy.saxpy grid=1 block=16 y y f32:2 u32:16" >"$MNT/.vyre/ctl" 2>/dev/null && fail "a launch on the host backend"
		assertContains "a launch needs the cuda backend" "$(tail -n 1 "$MNT/.vyre/log")" "launching needs the cuda backend"
	else
		assertNotEquals "the copy is refused" 0 $rc
		assertContains "$(cat "$MNT/.vyre/modules/saxpy.log")" "no NVRTC"
		assertContains "$(grep saxpy "$VY_LOG")" "Fix: install NVRTC"
	fi
	assertEquals "nothing compiled" 0 "$(stat_of compiles)"
}

# launch n=COUNT: what the parser and the validation refuse reaches the
# writer as EINVAL, with the line and a Fix in the log.
test_launch_n_refusals_say_how() {
	truncate -s 64 "$MNT/y"
	for bad in "launch std.fill_f32 n=0 y f32:1 u64:16|bad n '0'" \
		"launch std.fill_f32 n=16 block=32 y f32:1 u64:16|n= with block=" \
		"launch std.fill_f32 n=16 grid=8 y f32:1 u64:16|n= with grid=" \
		"launch std.fill_f32 grid=auto block=32 y f32:1 u64:16|grid=auto needs n=COUNT" \
		"launch std.fill_f32 n=16 shared=64 y f32:1 u64:16|n= with shared=" \
		"launch std.fill_f32 y f32:1 u64:16|launch needs grid= and block=, or n=COUNT"; do
		err=$( (echo "${bad%%|*}" >"$MNT/.vyre/ctl") 2>&1)
		assertContains "${bad%%|*}" "$err" "Invalid argument"
		log=$(tail -n 1 "$MNT/.vyre/log")
		assertContains "$log" "error line 1: ${bad#*|}"
		assertContains "$log" "(Fix: "
	done
	assertEquals "nothing ran" 0 "$(stat_of launches)"
}

. tests/shunit.sh
