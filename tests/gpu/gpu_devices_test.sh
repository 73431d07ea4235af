#!/usr/bin/env bash
# run.sh: alone (it reads the whole GPU's memory: nvidia-smi or torch.cuda.mem_get_info)
# One mount over two GPUs (issue "devices"): placement, a move under
# readers, peer copies with no host byte, a saxpy in device 1's launcher,
# PyTorch mapping a file of device 1, the refusal of a launch over both,
# ENOSPC naming the full GPU, and both GPUs back at their baseline.
# Skipped, with the reason, on a machine with one GPU.
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python:$PWD/tests/gpu:$PWD/tests/client${PYTHONPATH:+:$PYTHONPATH}

. tests/client/ranks_lib.sh
gpus() { nvidia-smi -L 2>/dev/null | grep -c '^GPU'; }
used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$1" | tr -d ' '; }

setUp() {
	if [ "$(gpus)" -lt 2 ]; then
		skip_test "this machine has $(gpus) GPU(s); the devices suite needs two (Fix: run it on a two-GPU machine)"
		return 0
	fi
	BASE0=$(used_mib 0) BASE1=$(used_mib 1)
	mount_vyrefs "backend=cuda,devices=0,1,resident_budget=1400M" || { fail "mount"; return 1; }
	mkdir "$MNT/g0" "$MNT/g1"
	setfattr -n user.vyre.device -v 0 "$MNT/g0"
	setfattr -n user.vyre.device -v 1 "$MNT/g1"
}

tearDown() {
	unmount_vyrefs
	drop_log
}

# Tests run only over a mount setUp made (none when skipped).
ready() { [ -n "$MNT" ]; }

released() {
	unmount_vyrefs
	assertReleased
	assertEquals "GPUs released" 2 "$(grep -c 'device memory back to baseline (device' "$VY_LOG")"
	assertEquals "GPU 0: MiB used before the mount and after" "$BASE0" "$(used_mib 0)"
	assertEquals "GPU 1: MiB used before the mount and after" "$BASE1" "$(used_mib 1)"
}

test_both_gpus_under_one_mount() {
	ready || return 0
	assertEquals "ordinals" "0 1" "$(awk '$1 == "ordinal" { printf "%s%s", s, $2; s = " " }' "$MNT/.vyre/device")"
	assertEquals "df: two budgets" $((2800 << 20)) "$(df -B1 --output=size "$MNT" | tail -1 | tr -d ' ')"
	grep '^peers' "$MNT/.vyre/device" >&2
	head -c 8M /dev/urandom >"$MNT/g1/f"
	assertEquals "placed by the directory" 1 "$(dev_of "$MNT/g1/f")"
	assertEquals "held by GPU 1" $((8 << 20)) "$(stat_of dev1.resident_bytes)"
	released
}

test_a_move_and_peer_copies_on_the_gpus() {
	ready || return 0
	need python3 || return 0
	src=$(mktemp)
	head -c 64M /dev/urandom >"$src"
	cp "$src" "$MNT/g0/f"
	want=$(sum_of "$src")
	h0=$(stat_of h2d_bytes) p0=$(stat_of peer_bytes) s0=$(stat_of peer_staged_bytes)
	bad=$(mktemp)
	start_readers "$MNT/g0/f" "$want" 6 "$bad"
	for to in 1 0 1 0; do
		setfattr -n user.vyre.device -v $to "$MNT/g0/f" || fail "move to $to"
	done
	wait "${readers[@]}"
	assertEquals "every read whole: $(cat "$bad")" 0 "$(wc -c <"$bad")"
	python3 -c 'import os, sys
i = os.open(sys.argv[1], os.O_RDONLY); o = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
left = os.fstat(i).st_size
while left:
    left -= os.copy_file_range(i, o, left)' "$MNT/g0/f" "$MNT/g1/copy"
	staged=$(($(stat_of peer_staged_bytes) - s0)) peer=$(($(stat_of peer_bytes) - p0))
	assertEquals "4 moves and a copy, every byte device to device or staged" $((5 * (64 << 20))) $((peer + staged))
	if [ "$staged" = 0 ]; then
		assertEquals "peer: no host-to-device byte" "$h0" "$(stat_of h2d_bytes)"
	fi
	assertEquals "$want" "$(sum_of "$MNT/g0/f")"
	assertEquals "$want" "$(sum_of "$MNT/g1/copy")"
	assertEquals "GPU 0 holds f" $((64 << 20)) "$(stat_of dev0.resident_bytes)"
	assertEquals "GPU 1 holds the copy" $((64 << 20)) "$(stat_of dev1.resident_bytes)"
	rm -f "$src" "$bad"
	released
}

test_a_saxpy_on_gpu_1_and_torch_maps_its_result() {
	ready || return 0
	need python3 || return 0
	N=1048576
	python3 -c "import numpy as np; np.arange($N, dtype=np.float32).tofile('$MNT/g1/x'); np.ones($N, dtype=np.float32).tofile('$MNT/g1/y')"
	echo "launch std.axpy_f32 n=$N g1/y g1/x f32:2 u64:$N" >"$MNT/.vyre/ctl" || fail "saxpy: $(tail -n 2 "$MNT/.vyre/log")"
	assertEquals "it ran on GPU 1" 1 "$(stat_of dev1.launches)"
	assertEquals "not on GPU 0" 0 "$(stat_of dev0.launches)"
	out=$(python3 -c "import numpy as np; y = np.fromfile('$MNT/g1/y', dtype=np.float32); x = np.arange($N, dtype=np.float32); print(bool((y == 2 * x + 1).all()))")
	assertEquals "y = 2x + 1" True "$out"
	if python3 -c 'import torch' 2>/dev/null; then
		out=$(python3 - "$MNT/g1/y" <<'PY'
import sys, torch, vyrefs
with vyrefs.map(sys.argv[1], dtype=torch.float32) as m:
    t = torch.as_tensor(m, device="cuda:%d" % m.device)
    print(m.device, t.device, float(t[3]))
    del t
PY
)
		assertEquals "torch maps GPU 1's file on cuda:1" "1 cuda:1 7.0" "$out"
	fi
	head -c $((N * 4)) /dev/zero >"$MNT/g0/x0"
	echo "launch std.axpy_f32 n=$N g1/y g0/x0 f32:2 u64:$N" >"$MNT/.vyre/ctl" 2>/dev/null
	assertNotEquals "a launch over both GPUs is refused" 0 $?
	assertContains "$(tail -n 1 "$MNT/.vyre/log")" "names buffers on two devices"
	assertEquals "nothing more ran" 1 "$(stat_of launches)"
	released
}

test_a_full_gpu_names_itself() {
	ready || return 0
	head -c 1300M /dev/zero >"$MNT/g1/big" || fail "fill"
	head -c 200M /dev/zero >"$MNT/g1/more" 2>/dev/null
	assertNotEquals "ENOSPC" 0 $?
	assertContains "$(cat "$VY_LOG")" "device 1 is full"
	assertContains "$(cat "$VY_LOG")" "device 0 has"
	rm -f "$MNT/g1/more" "$MNT/g1/big"
	assertEquals "back to nothing" 0 "$(stat_of resident_bytes)"
	released
}

# Issue "gpus": a 1.1B model in 500 MB shards, larger than one GPU's budget
# here (1400M), copied in with no setfattr: its shards fill GPU 0, then GPU
# 1, in order, and from_pretrained(dir) runs it across both with logits
# equal to transformers' own load with the same device map and on one GPU.
test_a_model_larger_than_one_gpu_runs_across_both() {
	ready || return 0
	python3 -c 'import transformers, accelerate' 2>/dev/null || { skip_test "needs transformers and accelerate"; return; }
	TMP=$(mktemp -d /dev/shm/vyrefs-devices.XXXXXX)
	assertEquals "shards 5" "$(python3 tests/gpu/devices_check.py save "$TMP")"
	"$VYREFS" cp -r "$TMP/tl" "$MNT/" || fail "vyrefs cp -r"
	got=$(for f in "$MNT"/tl/*.safetensors; do printf '%s' "$(dev_of "$f")"; done)
	echo "shards on GPUs $got" >&2
	assertTrue "GPU 0 filled first, then GPU 1, in shard order: $got" "echo $got | grep -qE '^0+1+$'"
	out=$(python3 tests/gpu/devices_check.py compare "$MNT/tl" "$TMP/tl" 2>"$TMP/err") || cat "$TMP/err" >&2
	cat "$TMP/err" >&2
	assertContains "$out" "runs on 0,1 copied only for split layers True said so True"
	assertContains "$out" "logits equal to the same map True greedy equal True"
	assertContains "$out" "logits equal to one GPU True"
	# cp -r (GNU): its own order; the model runs all the same.
	rm -rf "$MNT/tl"
	cp -r "$TMP/tl" "$MNT/tl2" || fail "cp -r"
	out=$(python3 tests/gpu/devices_check.py compare "$MNT/tl2" "$TMP/tl" 2>"$TMP/err") || cat "$TMP/err" >&2
	cat "$TMP/err" >&2
	assertContains "cp -r" "$out" "copied only for split layers True said so True"
	assertContains "cp -r" "$out" "logits equal to the same map True greedy equal True"
	rm -rf "$MNT/tl2"
	# A small Llama in 300 KB shards, one moved to the other GPU by hand:
	# the layers it shares with its neighbours are split; it runs, and
	# says what it copied.
	python3 tests/gpu/attach_check.py llama-save "$TMP" >/dev/null || fail "llama-save"
	"$VYREFS" cp -r "$TMP/llama" "$MNT/" || fail "vyrefs cp -r"
	second=$(ls "$MNT"/llama/*.safetensors | sed -n 2p)
	setfattr -n user.vyre.device -v $((1 - $(dev_of "$second"))) "$second" || fail "move"
	out=$(python3 tests/gpu/devices_check.py compare "$MNT/llama" "$TMP/llama" 2>"$TMP/err")
	cat "$TMP/err" >&2
	assertContains "split by hand" "$out" "copied only for split layers True said so True"
	assertContains "split by hand" "$out" "logits equal to the same map True greedy equal True"
	assertNotContains "split by hand" "$(cat "$TMP/err")" " 0 layers split"
	rm -rf "$TMP" "$MNT/llama"
	released
}

# A mixture of experts, its shards on both GPUs: transformers converts it
# at load (fuses the experts). The copy is made spread as the files are,
# each GPU's part in files on that GPU, and attached with no copy; a new
# process maps that copy.
test_a_mixture_of_experts_on_both_gpus_is_converted_on_both() {
	ready || return 0
	python3 -c 'import transformers, accelerate' 2>/dev/null || { skip_test "needs transformers and accelerate"; return; }
	TMP=$(mktemp -d /dev/shm/vyrefs-devices.XXXXXX)
	python3 -c 'import sys, families_check as f; f.save(sys.argv[1], only="qwen3_moe")' "$TMP" || fail "save"
	"$VYREFS" cp -r "$TMP/qwen3_moe" "$MNT/moe" || fail "vyrefs cp -r"
	n=$(ls "$MNT"/moe/*.safetensors | wc -l)
	assertTrue "several shards ($n)" "[ $n -ge 4 ]"
	for f in $(ls "$MNT"/moe/*.safetensors | tail -n $((n / 2))); do
		setfattr -n user.vyre.device -v $((1 - $(dev_of "$f"))) "$f" || fail "move $f"
	done
	for round in first later; do
		out=$(python3 tests/gpu/devices_check.py moe "$MNT/moe" "$TMP/qwen3_moe" 2>"$TMP/err") || cat "$TMP/err" >&2
		cat "$TMP/err" >&2
		assertContains "$round" "$out" "converted on 0,1 runs on 0,1 copied 0"
		assertContains "$round" "$out" "logits equal to the same map True greedy equal True"
	done
	rm -rf "$TMP" "$MNT/moe"
	released
}

# Issue "gpus": tensor-parallel ranks with NCCL, each keeping its part on
# its own GPU (tests/client/ranks_lib.sh).
test_tensor_parallel_ranks_keep_their_parts_on_their_gpus() {
	ready || return 0
	python3 -c 'import torch.distributed as d; assert d.is_nccl_available()' 2>/dev/null || { skip_test "needs torch with NCCL"; return; }
	ranks_save_attach_refuse
	rm -rf "$MNT/tp"
	released
}

test_a_two_rank_job_answers_through_a_kill_and_a_new_job_attaches() {
	ready || return 0
	python3 -c 'import torch.distributed as d; assert d.is_nccl_available()' 2>/dev/null || { skip_test "needs torch with NCCL"; return; }
	unmount_vyrefs
	mount_vyrefs "backend=cuda,devices=0,1,resident_budget=1400M,survive=on" || { fail "mount"; return; }
	ranks_through_a_kill
	rm -rf "$MNT/tp"
	unmount_vyrefs
	# The successor's log is its own: the GPUs say what is left.
	gpus_at_baseline() { [ "$(used_mib 0)" = "$BASE0" ] && [ "$(used_mib 1)" = "$BASE1" ]; }
	wait_for "both GPUs back at their baseline ($BASE0, $BASE1 MiB; now $(used_mib 0), $(used_mib 1))" gpus_at_baseline
}

. tests/shunit.sh
