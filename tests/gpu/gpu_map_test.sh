#!/usr/bin/env bash
# Mapping files into CUDA programs: PyTorch (as_tensor through
# __cuda_array_interface__, from_dlpack) and CuPy see a file's device memory
# with no copy; what torch writes shows through the mount after sync and
# after unmap; two processes see each other's writes; a killed client
# releases its mapping; an unlinked mapped file is freed at the last unmap;
# the GPU is back at its baseline after unmount (run alone: beside other
# suites the daemon's own check at unmount).
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}

gpu_used_mib() {
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '
}

have() { python3 -c "import $1" 2>/dev/null; }

setUp() {
	BASE_MIB=$(gpu_used_mib)
	mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
}

py() { python3 - "$MNT" "$@"; }

# Issue 67 (edges) 4: a GPU cannot keep a program from writing memory it
# was handed (the importer sets its own access), so the cuda backend maps
# no file read-only: the reader is refused with a Fix, nothing mapped.
test_a_read_only_mapping_is_refused_with_a_fix() {
	truncate -s 4M "$MNT/model"
	err=$("$BUILD/tests/client/vymap" ro-cat "$MNT/model" 2>&1 >/dev/null)
	assertEquals "EOPNOTSUPP" 95 $?
	assertContains "$err" "the cuda backend cannot map a file read-only"
	assertContains "$err" "(Fix: copy the file into one of your own"
	assertEquals "nothing mapped" 0 "$(stat_of mapped_bytes)"
}

test_torch_sums_a_file_written_with_cp() {
	have torch || { skip_test "needs torch"; return; }
	python3 -c "import numpy as np; np.arange(1 << 22, dtype=np.float32).__mod__(1000).tofile('$MNT.src')"
	cp "$MNT.src" "$MNT/x" || fail "cp"
	want=$(python3 -c "import numpy as np; print(float(np.fromfile('$MNT.src', dtype=np.float32).astype(np.float64).sum()))")
	out=$(py <<'PY'
import sys, torch, vyrefs
with vyrefs.map(sys.argv[1] + "/x", dtype=torch.float32) as m:
    t = torch.as_tensor(m, device="cuda")
    assert t.data_ptr() == m.ptr and t.is_cuda, "a copy"
    d = torch.from_dlpack(m)
    assert d.data_ptr() == m.ptr and d.dtype == torch.float32
    print(float(t.double().sum()), t.numel(), m.device)
    del t, d
PY
)
	assertEquals "$want 4194304 0" "$out"
	rm -f "$MNT.src"
}

# Issue "trust", finding 2 on the GPU: memory a mapping hands out holds
# only its file's bytes and zeros. A deleted secret's memory goes back to
# the pool; a 5-byte file and a 2.5 MiB one mapped after it read zeros
# past their ends, to the end of what each mapping covers.
test_a_mapping_past_its_file_holds_zeros_not_a_deleted_files_bytes() {
	have torch || { skip_test "needs torch"; return; }
	out=$(py <<'PY'
import os, sys, torch, vyrefs
mnt = sys.argv[1]
G = 2 << 20
class Span:  # the whole mapped span, past the file's end: what a CUDA program can read
    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 3}
for size in (5, 5 << 19):
    with open(mnt + "/secret", "wb") as f:
        f.write(b"SECRET-ROOT-KEY-" * (8 << 16))  # 8 MiB
    os.unlink(mnt + "/secret")
    with open(mnt + "/small", "wb") as f:
        f.write(b"h" * size)
    m = vyrefs.map(mnt + "/small")
    t = torch.as_tensor(Span(m.ptr, (m.size + G - 1) // G * G), device="cuda")
    print(size, m.size, int((t[:size] == ord("h")).sum()), int(t[size:].count_nonzero()))
    del t
    m.close()
    os.unlink(mnt + "/small")
PY
)
	# A mapping's size is its file's; its span is whole granules, and the
	# bytes there past the file's end are zeros (vy_clear_past).
	assertEquals "5 5 5 0
2621440 2621440 2621440 0" "$out"
}

test_torch_writes_show_through_the_mount() {
	have torch || { skip_test "needs torch"; return; }
	truncate -s 16M "$MNT/y"
	out=$(py <<'PY'
import sys, torch, vyrefs, hashlib
mnt = sys.argv[1]
m = vyrefs.map(mnt + "/y", dtype="int32")
t = torch.as_tensor(m, device="cuda")
t.copy_(torch.arange(t.numel(), dtype=torch.int32, device="cuda") * 3)
m.sync()
want = (torch.arange(t.numel(), dtype=torch.int32) * 3).numpy().tobytes()
print(open(mnt + "/y", "rb").read() == want)
t.fill_(-1)
del t
m.close()
print(open(mnt + "/y", "rb").read(8).hex())
PY
)
	assertEquals "True
ffffffffffffffff" "$out"
	head -c 8 "$MNT/y" | od -An -tx1 | tr -d ' \n' | grep -q '^ffffffffffffffff$' || fail "cmp after unmap"
}

test_cupy_sees_the_same_memory() {
	have cupy || { skip_test "needs cupy"; return; }
	python3 -c "import struct; open('$MNT/c', 'wb').write(struct.pack('<1000d', *[i * 0.5 for i in range(1000)]))"
	out=$(py <<'PY'
import sys, cupy, vyrefs
with vyrefs.map(sys.argv[1] + "/c", dtype="float64") as m:
    a = cupy.asarray(m)
    print(a.data.ptr == m.ptr, float(a.sum()))
    a *= 2
    m.sync()
PY
)
	assertEquals "True 249750.0" "$out"
	assertEquals "$(python3 -c "import struct; print(struct.unpack('<d', open('$MNT/c','rb').read()[8:16])[0])")" "1.0"
}

test_two_processes_see_each_others_writes() {
	have torch || { skip_test "needs torch"; return; }
	truncate -s 4M "$MNT/s"
	out=$(py <<'PY'
import sys, subprocess, torch, vyrefs
mnt = sys.argv[1]
with vyrefs.map(mnt + "/s", dtype="int64") as m:
    t = torch.as_tensor(m, device="cuda")
    t[5] = 1234567
    torch.cuda.synchronize()
    child = ("import sys, torch, vyrefs\n"
             "m = vyrefs.map(sys.argv[1], dtype='int64'); t = torch.as_tensor(m, device='cuda')\n"
             "print(int(t[5])); t[6] = 7654321; torch.cuda.synchronize(); del t; m.close()\n")
    print(subprocess.run([sys.executable, "-c", child, mnt + "/s"], capture_output=True, text=True).stdout.strip())
    print(int(t[6]))
    del t
PY
)
	assertEquals "1234567
7654321" "$out"
}

test_killed_client_releases_and_unlink_frees_at_last_unmap() {
	have torch || { skip_test "needs torch"; return; }
	truncate -s 64M "$MNT/k"
	python3 - "$MNT/k" >"$MNT.out" 2>&1 <<'PY' &
import sys, time, torch, vyrefs
m = vyrefs.map(sys.argv[1], dtype="uint8")
t = torch.as_tensor(m, device="cuda")
print("mapped", flush=True)
time.sleep(60)
PY
	holder=$!
	for _ in $(seq 200); do grep -q mapped "$MNT.out" 2>/dev/null && break; sleep 0.1; done
	assertEquals 67108864 "$(stat_of mapped_bytes)"
	rm "$MNT/k"
	assertEquals "unlinked but mapped: still held" 67108864 "$(stat_of resident_bytes)"
	kill -9 "$holder"
	wait "$holder" 2>/dev/null
	for _ in $(seq 100); do [ "$(stat_of mapped_bytes)" = 0 ] && break; sleep 0.1; done
	assertEquals "the mapping ended with the process" 0 "$(stat_of mapped_bytes)"
	assertEquals "and the file's memory is free" 0 "$(stat_of resident_bytes)"
	rm -f "$MNT.out"
	unmount_vyrefs
	assertReleased
	# The whole GPU's figure only alone: beside other suites (tests/run.sh)
	# their memory moves it, and assertReleased has the daemon's own check.
	[ "${VY_TEST_GPU_SHARED:-0}" = 1 ] && return
	for _ in $(seq 50); do [ "$(gpu_used_mib)" = "$BASE_MIB" ] && break; sleep 0.1; done
	assertEquals "MiB used on the GPU before the mount and after" "$BASE_MIB" "$(gpu_used_mib)"
}

. tests/shunit.sh
