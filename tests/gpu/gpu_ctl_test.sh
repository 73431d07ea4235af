#!/usr/bin/env bash
# The control file on the GPU: modules loaded from modules/ (a real PTX
# fixture), kernels launched over files, results checked against values
# computed on the host; a broken module's JIT log; refusals before launch;
# one sync for a 1000-launch repeat; cat sees device results.
. tests/fs/lib.sh
FIX=tests/gpu/fixtures
N=1048576

setUp() {
	mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
	cp "$FIX/kernels.ptx" "$MNT/.vyre/modules/kernels.ptx" || fail "module load"
}

# floats FILE COUNT EXPR: write COUNT float32 values EXPR(i).
floats() {
	python3 -c "
import struct, sys
n = int(sys.argv[2]); f = eval('lambda i: ' + sys.argv[3])
open(sys.argv[1], 'wb').write(struct.pack('<%df' % n, *[f(i) for i in range(n)]))" "$1" "$2" "$3"
}

# check FILE COUNT EXPR: every float equals EXPR(i) exactly; print mismatches.
check() {
	python3 -c "
import struct, sys
n = int(sys.argv[2]); f = eval('lambda i: ' + sys.argv[3])
got = struct.unpack('<%df' % n, open(sys.argv[1], 'rb').read(4 * n))
bad = [i for i in range(n) if got[i] != struct.unpack('<f', struct.pack('<f', f(i)))[0]]
print(len(bad), 'bad', [(i, got[i]) for i in bad[:3]])" "$1" "$2" "$3"
}

test_module_loads_and_lists() {
	assertEquals "kernels.log kernels.ptx" "$(ls "$MNT/.vyre/modules" | tr '\n' ' ' | sed 's/ $//')"
	cmp "$FIX/kernels.ptx" "$MNT/.vyre/modules/kernels.ptx" || fail "module bytes"
}

# The driver's JIT cache (kernel_cache) goes to $XDG_CACHE_HOME/vyrefs, so a
# remount loads the module without compiling it again.
test_jit_cache_is_kept_per_user() {
	unmount_vyrefs
	cache=$(mktemp -d) || return 1
	XDG_CACHE_HOME=$cache mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
	cp "$FIX/kernels.ptx" "$MNT/.vyre/modules/kernels.ptx" || fail "module load"
	assertTrue "the JIT cache has entries" "[ -n \"\$(find '$cache/vyrefs' -type f 2>/dev/null | head -n 1)\" ]"
	rm -rf "$cache"
}

test_saxpy_over_files() {
	floats "$MNT/x" $N 'i % 1000'
	floats "$MNT/y" $N '1.0'
	cat "$MNT/y" >/dev/null # cached pages of the old bytes
	echo "launch kernels.saxpy grid=$((N / 256)) block=256 y x f32:2.0 u32:$N" >"$MNT/.vyre/ctl" || fail "launch"
	assertEquals "0 bad []" "$(check "$MNT/y" $N '2.0 * (i % 1000) + 1.0')"
	assertContains "$(tail -n 1 "$MNT/.vyre/log")" "ok steps=1"
	assertEquals 1 "$(stat_of launches)"
}

# CUDA C compiled by NVRTC for this GPU, then launched: saxpy and a
# reduction give the values computed on the host.
test_cuda_c_modules_run() {
	cat >"$MNT.k.cu" <<'CU'
// vyrefs: -DSCALE=3
extern "C" __global__ void saxpy3(float *y, const float *x, float a, unsigned n)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = SCALE * a * x[i] + y[i];
}
extern "C" __global__ void total(const float *x, float *out, unsigned n)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		atomicAdd(out, x[i]);
}
CU
	cp "$MNT.k.cu" "$MNT/.vyre/modules/k.cu" || fail "compile and load"
	rm -f "$MNT.k.cu"
	floats "$MNT/x" 1000 'i % 10'
	floats "$MNT/y" 1000 '1.0'
	truncate -s 4 "$MNT/out"
	printf 'launch k.saxpy3 grid=4 block=256 y x f32:2.0 u32:1000\nlaunch k.total grid=4 block=256 x out u32:1000\n' \
		>"$MNT/.vyre/ctl" || fail "launch"
	assertEquals "0 bad []" "$(check "$MNT/y" 1000 '3 * 2.0 * (i % 10) + 1.0')"
	assertEquals "4500.0" "$(python3 -c "import struct; print(struct.unpack('<f', open('$MNT/out','rb').read(4))[0])")"
	assertEquals 1 "$(stat_of compiles)"
}

test_reduction() {
	floats "$MNT/x" 4096 'i % 7'
	truncate -s 4 "$MNT/out"
	echo "launch kernels.sum grid=16 block=256 x out u32:4096" >"$MNT/.vyre/ctl" || fail "launch"
	want=$(python3 -c 'print(float(sum(i % 7 for i in range(4096))))')
	got=$(python3 -c "import struct; print(struct.unpack('<f', open('$MNT/out','rb').read(4))[0])")
	assertEquals "$want" "$got"
}

test_repeat_1000_launches_one_sync() {
	floats "$MNT/v" 1024 '1.0'
	echo "fill v 0 0 0" >"$MNT/.vyre/ctl" || fail "share v" # its move to memory of its own
	syncs=$(stat_of syncs)
	printf 'repeat 1000\nlaunch kernels.scale grid=4 block=256 v f32:1.001 u64:1024\nend\n' >"$MNT/.vyre/ctl" || fail "repeat"
	assertEquals "one sync" $((syncs + 1)) "$(stat_of syncs)"
	assertEquals 1000 "$(stat_of launches)"
	assertContains "$(tail -n 1 "$MNT/.vyre/log")" "ok steps=1000"
	want=$(python3 -c 'import struct
v = struct.unpack("<f", struct.pack("<f", 1.0))[0]
for _ in range(1000): v = struct.unpack("<f", struct.pack("<f", v * struct.unpack("<f", struct.pack("<f", 1.001))[0]))[0]
print(v)')
	assertEquals "$want" "$(python3 -c "import struct; print(struct.unpack('<f', open('$MNT/v','rb').read(4))[0])")"
	assertTrue "device time measured" "[ $(stat_of device_time_us) -gt 0 ]"
}

test_refused_before_launch() {
	floats "$MNT/y" 256 '1.0'
	floats "$MNT/x" 256 '1.0'
	for bad in "launch kernels.saxpy grid=1 block=256 y x f32:2.0" \
		"launch kernels.saxpy grid=1 block=256 y x u64:2 u32:256" \
		"launch kernels.saxpy grid=1 block=2048 y x f32:2.0 u32:256" \
		"launch kernels.saxpy grid=4294967295,70000 block=1 y x f32:2.0 u32:256" \
		"launch kernels.nothere grid=1 block=1" \
		"launch kernels.saxpy grid=1 block=1 y+4096 x f32:2.0 u32:1"; do
		err=$( (echo "$bad" >"$MNT/.vyre/ctl") 2>&1)
		assertContains "$bad" "$err" "Invalid argument"
		assertContains "$bad: $(tail -n 1 "$MNT/.vyre/log")" "$(tail -n 1 "$MNT/.vyre/log")" "(Fix: "
	done
	assertContains "$(grep -c 'takes 4 argument' "$MNT/.vyre/log")" "1"
	assertEquals "nothing launched" 0 "$(stat_of launches)"
	assertEquals "0 bad []" "$(check "$MNT/y" 256 '1.0')"
}

test_broken_module_shows_its_jit_log() {
	cp "$FIX/broken.ptx" "$MNT/.vyre/modules/broken.ptx" 2>"$MNT.err"
	assertNotEquals "the close fails" 0 $?
	assertContains "$(cat "$MNT.err")" "Invalid argument"
	rm -f "$MNT.err"
	assertFalse "not listed as loaded" "[ -e '$MNT/.vyre/modules/broken.ptx' ]"
	log=$(cat "$MNT/.vyre/modules/broken.log")
	assertContains "$log" "error"
	assertContains "$log" "line" # ptxas names the line it stopped at
}

test_removing_a_module_unloads_it() {
	rm "$MNT/.vyre/modules/kernels.ptx" || fail "rm"
	assertFalse "[ -e '$MNT/.vyre/modules/kernels.log' ]"
	floats "$MNT/x" 256 '1.0'
	err=$( (echo "launch kernels.scale grid=1 block=256 x f32:2 u64:256" >"$MNT/.vyre/ctl") 2>&1)
	assertContains "$(tail -n 1 "$MNT/.vyre/log")" "no module 'kernels'"
}

. tests/shunit.sh
