#!/usr/bin/env bash
# run.sh: long (minutes on the GPU machine: it starts first)
# Every family transformers loads attaches from a cuda mount (issue
# "families"), beside the other suites: it reads no whole-GPU figure. The
# helper is tests/gpu/families_check.py.
. tests/gpu/models_lib.sh

# Issue "families": each family transformers loads attaches from the mount
# and computes what transformers' own load computes (logits and 32 greedy
# tokens; a quantized checkpoint its tensors); the ones it converts
# (experts fused, fp32-kept modules) go through a converted copy kept
# beside the files, made again when a shard is rewritten.
# tests/gpu/families_check.py has the configs.
test_every_family_attaches_as_transformers_loads_it() {
	have transformers || { skip_test "needs torch and transformers"; return; }
	python3 tests/gpu/families_check.py save "$TMP" 2>"$TMP/err" || { fail "save: $(tail -n 3 "$TMP/err")"; return; }
	"$VYREFS" cp -r "$TMP"/llama "$TMP"/qwen2_tied "$TMP"/qwen3_moe "$TMP"/mixtral "$TMP"/t5 "$TMP"/bert "$TMP"/llava "$TMP"/llama_fp8 "$MNT/" ||
		fail "vyrefs cp"
	out=$(python3 tests/gpu/families_check.py compare "$MNT" "$TMP" 2>"$TMP/err")
	cat "$TMP/err" | grep -v 'it/s\]' >&2
	echo "$out" >&2
	for f in llama qwen2_tied bert; do
		assertContains "$f: attached as it is" "$out" "$f converted no logits equal True"
	done
	for f in qwen3_moe mixtral t5; do
		assertContains "$f: through its converted copy" "$out" "$f converted yes logits equal True"
	done
	assertContains "llava" "$out" "llava converted"
	# Quantized (fine-grained FP8): its float8 weights and scales attach
	# as stored, no copy; logits where the machine runs FP8 (n/a where
	# transformers' own forward needs a package it lacks, as ours does).
	assertContains "llama_fp8: attached as stored" "$out" \
		"llama_fp8 converted no copied 0 tensors equal True (torch.bfloat16 torch.float32 torch.float8_e4m3fn)"
	assertNotContains "every family" "$out" "logits equal False"
	assertNotContains "every family" "$out" "greedy equal False"
	assertNotContains "every family" "$out" " failed "
	# A second process: the converted copies mapped as they are, no file
	# memory made (resident bytes as before), no weight allocated.
	local resident
	resident=$(stat_of resident_bytes)
	out=$(python3 tests/gpu/families_check.py later "$MNT" 2>>"$TMP/err")
	echo "$out" >&2
	assertEquals "a second process: no new file memory" "$resident" "$(stat_of resident_bytes)"
	local f conv weights taken
	for f in qwen3_moe mixtral t5; do
		read -r _ _ conv _ weights _ taken <<<"$(echo "$out" | grep "^$f ")"
		assertEquals "$f: a second process, through its copy" yes "$conv"
		assertTrue "$f: a second process takes ${taken:-?} bytes, under a tenth of its weights' ${weights:-?}" \
			"[ $((${taken:-0} * 10)) -lt ${weights:-0} ]"
	done
	out=$(python3 tests/gpu/families_check.py stale "$MNT" "$TMP" 2>>"$TMP/err")
	assertContains "a shard rewritten: remade" "$out" "remade True yes logits equal True greedy equal True"
}

. tests/shunit.sh
