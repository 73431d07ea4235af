#!/usr/bin/env bash
# run.sh: alone (it reads the whole GPU's memory: nvidia-smi or torch.cuda.mem_get_info)
# Whole models from a cuda mount (vyrefs.torch, vyrefs.transformers): tiny
# random Llamas saved sharded by save_pretrained give, through
# vyrefs.transformers.from_pretrained in a new process, logits equal bit for
# bit to transformers' from_pretrained from tmpfs, with no copy of the
# weights and the tied one tied; a torch.nn model saved sharded by
# vyrefs.torch.save and attached in two processes at once takes device
# memory once; a processed state dict comes back equal; DLPack hands a
# mapped tensor to cupy and jax with no copy where they take it; a
# conversion too big for the device is refused with nothing left mapped.
# The helper is tests/gpu/attach_check.py.
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python:$PWD/tests/client${PYTHONPATH:+:$PYTHONPATH}
CHECK=tests/gpu/attach_check.py

have() { python3 -c "import $1" 2>/dev/null; }

setUp() {
	mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
	TMP=$(mktemp -d /dev/shm/vyrefs-attach.XXXXXX)
}

tearDown() {
	rm -rf "$TMP"
	unmount_vyrefs
}

test_llama_attached_answers_as_from_pretrained_from_tmpfs() {
	have transformers || { skip_test "needs torch and transformers"; return; }
	assertEquals "llama True
tied True" "$(python3 $CHECK llama-save "$TMP")"
	"$VYREFS" cp -r "$TMP/llama" "$TMP/tied" "$MNT/" || fail "vyrefs cp"
	out=$(python3 $CHECK llama-compare "$MNT" "$TMP" 2>"$TMP/err") || cat "$TMP/err"
	assertEquals "llama logits equal True tensors equal True tied False eval True device cuda:0 no copy True generation_config True
tied logits equal True tensors equal True tied True eval True device cuda:0 no copy True generation_config True" "$out"
	assertEquals "every mapping ended with the process" 0 "$(stat_of mapped_bytes)"
}

# Issue "exact": shards whose data starts at 8 mod 16 are placed by the
# mount (fs/place.c), so every parameter sits where PyTorch's allocator
# would put it, and the model computes what transformers' own load does.
test_tinyllama_sharded_at_8_mod_16_placed_and_bit_for_bit() {
	have transformers || { skip_test "needs torch and transformers"; return; }
	assertEquals "shards True data at 8 mod 16 True" "$(python3 $CHECK exact-save "$TMP")"
	"$VYREFS" cp -r "$TMP/tl" "$MNT/" || fail "vyrefs cp"
	for f in "$TMP"/tl/*; do cmp "$f" "$MNT/tl/$(basename "$f")" || fail "$(basename "$f") differs"; done
	out=$(python3 $CHECK exact-compare "$MNT" "$TMP" 2>"$TMP/err") || cat "$TMP/err"
	assertEquals "parameters off 512 0 []
logits equal True max diff 0.0
greedy equal True" "$out"
}

test_two_processes_attached_at_once_take_device_memory_once() {
	have torch || { skip_test "needs torch"; return; }
	saved=$(python3 $CHECK net-save "$MNT") || fail "net-save"
	resident=$(stat_of resident_bytes)
	python3 $CHECK net-hold "$MNT" "$TMP" >"$TMP/hold.out" 2>"$TMP/hold.err" &
	holder=$!
	for _ in $(seq 600); do [ -e "$TMP/ready" ] && break; kill -0 $holder 2>/dev/null || break; sleep 0.1; done
	[ -e "$TMP/ready" ] || { fail "the first process did not attach: $(cat "$TMP/hold.err")"; return; }
	one=$(stat_of mapped_bytes)
	second=$(python3 $CHECK net-second "$MNT" 2>"$TMP/err") || cat "$TMP/err"
	both=$(stat_of mapped_bytes)
	touch "$TMP/done"
	wait $holder
	assertEquals "the holder's answer is the saved model's" "$(echo "$saved" | cut -d' ' -f2)" "$(head -n 1 "$TMP/hold.out")"
	assertEquals "and so is the second's" "$(echo "$saved" | cut -d' ' -f2)" "$(echo "$second" | head -n 1)"
	assertContains "$second" "under a tenth True"
	# mapped_bytes is the memory mapped, counted once however many map it.
	assertEquals "both processes map the same bytes, counted once" "$one" "$both"
	assertEquals "one copy: resident bytes as before" "$resident" "$(stat_of resident_bytes)"
	echo "$second" | tail -n 1
}

test_processed_state_dict_saved_and_attached_back() {
	have torch || { skip_test "needs torch"; return; }
	assertEquals "True True True
vyrefs: attaching needs 1315840 True
meta True" "$(python3 $CHECK processed "$MNT")"
}

test_dlpack_to_cupy_and_jax_with_no_copy() {
	have torch || { skip_test "needs torch"; return; }
	out=$(python3 $CHECK dlpack "$MNT" 2>"$TMP/err") || cat "$TMP/err"
	echo "$out" # what each took (docs/client.md says where they copy)
	if have cupy; then assertContains "$out" "cupy True 8386560.0"; fi
	if have jax && ! echo "$out" | grep -q "jax refused"; then assertContains "$out" "jax True 8386560.0"; fi
	have cupy || have jax || skip_test "needs cupy or jax"
}

. tests/shunit.sh
