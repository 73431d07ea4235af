#!/usr/bin/env bash
# run.sh: alone (it reads the GPU's free memory: torch.cuda.mem_get_info)
# A torch.nn model saved sharded by vyrefs.torch.save and attached in two
# processes at once takes device memory once (the helper is
# tests/gpu/attach_check.py).
. tests/gpu/models_lib.sh

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

. tests/shunit.sh
