#!/usr/bin/env bash
# Files into and out of a GPU mount around FUSE: vyrefs cp round trips on
# the cuda backend; safetensors save into the mount (bytes device to device)
# read back exactly by safetensors.torch.load_file, from the mount and after
# vyrefs cp out to tmpfs; vyrefs.safetensors.load gives zero-copy views.
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}

setUp() {
	mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
	TMP=$(mktemp -d /tmp/vyrefs-ingest.XXXXXX) || return 1
}

tearDown() {
	rm -rf "$TMP"
	unmount_vyrefs
	drop_log
}

test_cp_round_trips_through_the_gpu() {
	for size in 1 4095 $((1048576 + 7)) $((256 * 1048576 + 3)); do
		head -c "$size" /dev/urandom >"$TMP/f"
		out=$("$VYREFS" cp -v "$TMP/f" "$MNT/f")
		assertContains "$out" "(by the daemon, around FUSE, $size of $size bytes moved"
		cmp "$TMP/f" "$MNT/f" || fail "in: $size"
		"$VYREFS" cp "$MNT/f" "$TMP/g" || fail "out"
		cmp "$TMP/f" "$TMP/g" || fail "out: $size"
	done
	assertEquals 0 "$(stat_of mapped_bytes)"
}

test_safetensors_save_then_load_file_is_exact() {
	python3 -c 'import torch, safetensors' 2>/dev/null || { skip_test "needs torch and safetensors"; return; }
	out=$(python3 - "$MNT" "$TMP" <<'PY'
import sys, subprocess, torch, vyrefs
from safetensors.torch import load_file
mnt, tmp = sys.argv[1], sys.argv[2]
torch.manual_seed(1)
ts = {"f32": torch.randn(3, 1001, device="cuda"),
      "f16": torch.randn(7, 13, 5, device="cuda").half(),
      "bf16": torch.randn(999, device="cuda").bfloat16(),
      "i64": torch.randint(-2**40, 2**40, (17, 3), device="cuda"),
      "one": torch.tensor(3.5, device="cuda")}
vyrefs.safetensors.save(ts, mnt + "/m.safetensors", metadata={"by": "vyrefs"})
back = load_file(mnt + "/m.safetensors", device="cuda")
print(all(torch.equal(back[k], ts[k]) and back[k].dtype == ts[k].dtype for k in ts), sorted(back) == sorted(ts))
print(vyrefs.copy(mnt + "/m.safetensors", tmp + "/m.safetensors"))
back = load_file(tmp + "/m.safetensors", device="cuda")
print(all(torch.equal(back[k], ts[k]) for k in ts))
views = vyrefs.safetensors.load(mnt + "/m.safetensors")
print(all(torch.equal(views[k], ts[k]) for k in ts), views["f32"].is_cuda)
views["f32"][0, 0] = 42.0
torch.cuda.synchronize()
del views
import gc; gc.collect()
print(float(load_file(mnt + "/m.safetensors")["f32"][0, 0]))
PY
)
	assertEquals "True True
daemon
True
True True
42.0" "$out"
	# The header is padded so the data starts on a page (issue "exact"): 4 KiB.
	assertEquals "saving moved no byte through the mount's write path but the header" 4096 "$(stat_of h2d_bytes)"
}

. tests/shunit.sh
