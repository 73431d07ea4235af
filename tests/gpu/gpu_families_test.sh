#!/usr/bin/env bash
# run.sh: long (minutes on the GPU machine: it starts first)
# Every family transformers loads attaches from a cuda mount (issue
# "families"), beside the other suites: it reads no whole-GPU figure. The
# helper is tests/gpu/families_check.py.
. tests/gpu/models_lib.sh

# Issue "families": each family transformers loads attaches from the mount
# and computes what transformers' own load computes (logits and 32 greedy
# tokens); the ones it converts (experts fused, fp32-kept modules) go
# through a converted copy kept beside the files, made again when a shard
# is rewritten. tests/gpu/families_check.py has the configs.
test_every_family_attaches_as_transformers_loads_it() {
	have transformers || { skip_test "needs torch and transformers"; return; }
	python3 tests/gpu/families_check.py save "$TMP" 2>"$TMP/err" || { fail "save: $(tail -n 3 "$TMP/err")"; return; }
	"$VYREFS" cp -r "$TMP"/llama "$TMP"/qwen2_tied "$TMP"/qwen3_moe "$TMP"/mixtral "$TMP"/t5 "$TMP"/bert "$TMP"/llava "$MNT/" ||
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
	assertNotContains "every family" "$out" "logits equal False"
	assertNotContains "every family" "$out" "greedy equal False"
	assertNotContains "every family" "$out" " failed "
	out=$(python3 tests/gpu/families_check.py stale "$MNT" "$TMP" 2>>"$TMP/err")
	assertContains "a shard rewritten: remade" "$out" "remade True yes logits equal True greedy equal True"
}

. tests/shunit.sh
