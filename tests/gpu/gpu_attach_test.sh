#!/usr/bin/env bash
# run.sh: long (minutes on the GPU machine: it starts first)
# Whole models from a cuda mount (vyrefs.torch, vyrefs.transformers): tiny
# random Llamas saved sharded by save_pretrained give, through
# vyrefs.transformers.from_pretrained in a new process, logits equal bit for
# bit to transformers' from_pretrained from tmpfs, with no copy of the
# weights and the tied one tied; a model saved by save_pretrained straight
# into the mount is placed and answers as transformers' own load of the
# same files; a processed state dict comes back equal; DLPack hands a
# mapped tensor to cupy and jax with no copy where they take it; a
# conversion too big for the device is refused with nothing left mapped.
# The helper is tests/gpu/attach_check.py. Two processes sharing one copy
# are gpu_share_test's (it reads the GPU's free memory: alone).
. tests/gpu/models_lib.sh

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

# Issue 67: a model saved by save_pretrained straight into the mount (its
# writer's order is its own: a file may be sized first, or its header
# written last) is placed, by a move at each file's last close where it
# was not as its head came, and attached it computes what transformers'
# own load of the same files computes, bit for bit.
test_saved_straight_into_the_mount_is_placed_and_bit_for_bit() {
	have transformers || { skip_test "needs torch and transformers"; return; }
	out=$(python3 $CHECK saved-into "$MNT" 2>"$TMP/err") || cat "$TMP/err"
	assertEquals "shards placed True misaligned 0
parameters off 256 0 []
logits equal True max diff 0.0
greedy equal True" "$out"
	echo "files placed by a move after their bytes came: $(stat_of placed_moves)" # the writer's order says how many
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
