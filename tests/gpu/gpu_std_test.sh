#!/usr/bin/env bash
# The standard module on the GPU: every std kernel against numpy
# (tests/gpu/std_check.py) on 1 and 1000003 elements, f16/bf16 rounding
# included; the n=COUNT forms against explicit grid and block; std is
# compiled once, on the first launch that names it, and not listed.
. tests/fs/lib.sh

setUp() {
	CACHE=$(mktemp -d) || return 1
	XDG_CACHE_HOME=$CACHE mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
}

tearDown() {
	rm -rf "$CACHE"
	unmount_vyrefs
	drop_log
	VY_LOG=""
}

# std_group GROUP: every case of it passes, and there were some.
std_group() {
	python3 -c 'import numpy' 2>/dev/null || { skip_test "needs python3 with numpy"; return 0; }
	# Its lines from stdout, its stderr apart: merged, a warning's line
	# lands where the interpreter flushes it, before or after the summary.
	out=$(python3 tests/gpu/std_check.py "$MNT" "$1" 2>"$CACHE/err")
	echo "$out" | grep -v '^ok ' | head -n 20
	assertContains "$1: $(tail -n 1 <<<"$out")" "$(tail -n 1 <<<"$out")" ", 0 failed"
	assertEquals "$1: cases ran" "" "$(tail -n 1 <<<"$out" | grep '^0 cases')"
	assertEquals "$1: no Python error" "" "$(grep -A 20 Traceback "$CACHE/err")"
}

test_fill() { std_group fill; }
test_iota() { std_group iota; }
test_axpy_scale_add_mul() { std_group arith; }
test_conversions_round_to_nearest_even() { std_group convert; }
test_reductions() { std_group reduce; }
test_compare_counts_mismatches() { std_group compare; }
test_n_forms_give_what_explicit_dims_give() { std_group forms; }

test_std_is_compiled_once_on_first_use() {
	truncate -s 4096 "$MNT/y"
	assertEquals "nothing compiled at mount" 0 "$(stat_of compiles)"
	echo "launch std.fill_f32 n=1024 y f32:2 u64:1024" >"$MNT/.vyre/ctl" || fail "first launch"
	assertEquals 1 "$(stat_of compiles)"
	echo "launch std.scale_f32 n=1024 y f32:2 u64:1024" >"$MNT/.vyre/ctl" || fail "second launch"
	assertEquals "loaded once" 1 "$(stat_of compiles)"
	assertEquals "0 0" "$(stat_of compile_cache_hits) $(ls "$MNT/.vyre/modules" | wc -l)"
	assertEquals "4.0" "$(python3 -c "import struct; print(struct.unpack('<f', open('$MNT/y','rb').read(4))[0])")"
	# A remount finds it in the cache.
	unmount_vyrefs
	XDG_CACHE_HOME=$CACHE mount_vyrefs "backend=cuda" || { fail "remount"; return 1; }
	truncate -s 4096 "$MNT/y"
	echo "launch std.fill_f32 n=1024 grid=auto y f32:2 u64:1024" >"$MNT/.vyre/ctl" || fail "after remount"
	assertEquals "0 1" "$(stat_of compiles) $(stat_of compile_cache_hits)"
}

. tests/shunit.sh
