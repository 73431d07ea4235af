#!/usr/bin/env bash
# run.sh: long (a minute and more on the GPU machine: it starts first)
# survive=on on a GPU (docs/survive.md): a tiny Llama attached from the
# mount (vyrefs.transformers, a mapping per shard) keeps answering, bit for
# bit, through three SIGKILLs of the daemon; after each, the successor
# counts every mapping again, a new process attaches the model and gets the
# same logits, and a mapped shard cannot shrink. After the holder exits
# every mapping has ended, and after unmount the GPU is at its baseline
# (run alone: beside other suites the keeper's clean exit is checked).
# The helper is tests/gpu/survive_check.py.
. tests/fs/lib.sh
. tests/survive/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python:$PWD/tests/client${PYTHONPATH:+:$PYTHONPATH}
CHECK=tests/gpu/survive_check.py
HPID=""

have() { python3 -c "import $1" 2>/dev/null; }

gpu_used_mib() {
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '
}

setUp() {
	TMP=$(mktemp -d /dev/shm/vyrefs-survive.XXXXXX)
	BASE_MIB=$(gpu_used_mib)
	mount_vyrefs "backend=cuda,survive=on" || { fail "mount"; return 1; }
}

tearDown() {
	[ -n "$HPID" ] && kill "$HPID" 2>/dev/null
	HPID=""
	unmount_vyrefs
	drop_log
	rm -rf "$TMP"
}

ready() { [ -e "$TMP/ready" ] || ! kill -0 "$HPID" 2>/dev/null; }
answered() { [ -e "$TMP/answered.$1" ] || ! kill -0 "$HPID" 2>/dev/null; }

test_an_attached_model_answers_through_three_kills() {
	have transformers || { skip_test "needs torch and transformers"; return; }
	python3 tests/gpu/attach_check.py llama-save "$TMP" >/dev/null || { fail "llama-save"; return; }
	"$VYREFS" cp -r "$TMP/llama" "$MNT/" || { fail "vyrefs cp"; return; }
	python3 $CHECK hold "$MNT" "$TMP" >"$TMP/holder.out" 2>"$TMP/holder.err" &
	HPID=$!
	wait_for "the holder attaches the model" ready || return
	[ -e "$TMP/ready" ] || { fail "the holder: $(cat "$TMP/holder.err")"; return; }
	local want mapped shard
	want=$(head -1 "$TMP/holder.out")
	mapped=$(stat_of mapped_bytes)
	assertNotEquals "the shards are mapped" 0 "$mapped"
	shard=$(ls "$MNT/llama" | grep safetensors | head -1)
	for i in 1 2 3; do
		kill_daemon || return
		assertEquals "kill $i: every mapping counted again" "$mapped" "$(stat_of mapped_bytes)"
		touch "$TMP/ask.$i"
		wait_for "the holder answers after kill $i" answered "$i" || return
		assertEquals "kill $i: the holder answers the same" "$i $want" "$(sed -n "$((i + 1))p" "$TMP/holder.out")"
		assertEquals "kill $i: a new process attaches it" "$want" "$(python3 $CHECK once "$MNT" 2>>"$TMP/once.err")"
		local err
		err=$(truncate -s 0 "$MNT/llama/$shard" 2>&1)
		assertContains "kill $i: a mapped shard does not shrink: $err" "$err" "Device or resource busy"
	done
	assertEquals "takeovers" 3 "$(stat_of takeovers)"
	touch "$TMP/done"
	wait "$HPID"
	local rc=$?
	HPID=""
	assertEquals "the holder: $(cat "$TMP/holder.err")" 0 "$rc"
	wait_for "every mapping ends with the holder" stat_is mapped_bytes 0
	assertNotContains "no mapping was lost" "$(cat "$VY_LOG")" "cannot be taken back"
	unmount_vyrefs
	assertEquals "the keeper's exit status" 0 "$VY_STATUS"
	# The whole GPU's figure only alone: beside other suites (tests/run.sh)
	# their memory moves it.
	[ "${VY_TEST_GPU_SHARED:-0}" = 1 ] && return
	for _ in $(seq 100); do [ "$(gpu_used_mib)" -le "$BASE_MIB" ] && break; sleep 0.1; done
	assertTrue "GPU memory back at its baseline ($BASE_MIB MiB): $(gpu_used_mib) MiB" "[ $(gpu_used_mib) -le $BASE_MIB ]"
}

. tests/shunit.sh
