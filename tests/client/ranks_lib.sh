# Tensor-parallel ranks over a mount of two devices (issue "gpus"), shared
# by attach_test.sh (host backend, gloo) and gpu_devices_test.sh (two GPUs,
# NCCL). The job is tests/client/ranks_check.py; $PY runs it; the mount is
# $MNT.

rank_job() { ${PY:-python3} tests/client/ranks_check.py run "$@" 2>>"$RANKS_ERR"; }

# Each rank saves its part into DIR/rank-r-of-N/ on its own device; the
# next job attaches them with no copy and answers the same; another GPU
# order, another config and another world size are refused, naming which.
ranks_save_attach_refuse() {
	RANKS_ERR=$(mktemp)
	saved=$(rank_job 2 save "$MNT/tp" | grep '^answer ')
	assertNotEquals "the job answered: $(tail -n 5 "$RANKS_ERR")" "" "$saved"
	assertEquals "a directory per rank" "rank-0-of-2 rank-1-of-2 " "$(ls "$MNT/tp" | tr '\n' ' ')"
	assertEquals "rank 0's on device 0, rank 1's on 1" "0 1" "$(dev_of "$MNT/tp/rank-0-of-2") $(dev_of "$MNT/tp/rank-1-of-2")"
	assertEquals "its files too" "0 1" "$(dev_of "$MNT/tp/rank-0-of-2/model.safetensors") $(dev_of "$MNT/tp/rank-1-of-2/model.safetensors")"
	out=$(rank_job 2 attach "$MNT/tp")
	assertEquals "attached, the same answer" "$saved" "$(echo "$out" | grep '^answer ')"
	assertContains "$out" "rank 0 mapped True"
	assertContains "$out" "rank 1 mapped True"
	assertContains "another GPU order" "$(rank_job 2 attach "$MNT/tp" swap)" \
		"refused: vyrefs: rank 0's files are on GPU 0; this rank runs on GPU 1: another GPU order"
	assertContains "another config" "$(rank_job 2 attach "$MNT/tp" other-config)" \
		"refused: vyrefs: rank 0's files were saved with another config"
	assertContains "another world size" "$(rank_job 1 attach "$MNT/tp")" \
		"rank-0-of-1 does not exist: the ranks were saved with world size 2"
	assertEquals "nothing stays mapped" 0 "$(stat_of mapped_bytes)"
	rm -f "$RANKS_ERR"
}

# survive=on: the daemon killed under a two-rank job holding its mappings;
# both ranks answer the same after the takeover, and a new job attaches.
ranks_through_a_kill() {
	RANKS_ERR=$(mktemp)
	hold=$(mktemp -d)
	saved=$(rank_job 2 save "$MNT/tp" | grep '^answer ')
	rank_job 2 hold "$MNT/tp" "$hold" >"$hold/out" &
	job=$!
	for _ in $(seq 600); do [ -e "$hold/ready" ] && break; kill -0 $job 2>/dev/null || break; sleep 0.1; done
	[ -e "$hold/ready" ] || { fail "the job did not attach: $(tail -n 5 "$RANKS_ERR")"; return; }
	old=$(stat_of pid)
	kill -9 "$old"
	wait_for 20 serving_pid_not "$old" && wait_for "its standby" standby_settled || { fail "no successor"; return; }
	touch "$hold/go"
	wait $job
	assertEquals "the job ended well" 0 $?
	assertEquals "both answers before and after the kill are the saved one" "${saved#answer }
${saved#answer }" "$(awk '$1 == "answer" || $1 == "again" { print $2 }' "$hold/out")"
	assertEquals "both ranks mapped" 2 "$(grep -c 'mapped True' "$hold/out")"
	out=$(rank_job 2 attach "$MNT/tp")
	assertEquals "a new job attaches after the takeover" "$saved" "$(echo "$out" | grep '^answer ')"
	rm -rf "$hold" "$RANKS_ERR"
}
