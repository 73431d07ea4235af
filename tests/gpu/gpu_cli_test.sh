#!/usr/bin/env bash
# run.sh: alone (on the cuda backend it reads the whole GPU's free memory: the daemon's baseline at unmount, df or RSS)
# GPU-only command-line checks: `auto` picks the GPU without a note, the
# self-check passes on it, and a wrong ordinal says what to do.
VYREFS=${VYREFS:-build/vyrefs}

test_auto_uses_the_gpu() {
	out=$("$VYREFS" --self-check 2>&1)
	assertEquals "$out" 0 $?
	assertContains "$out" "backend cuda"
	assertNotContains "$out" "using the host backend"
	assertContains "$out" "self-check passed"
}

test_wrong_ordinal_is_refused_with_fix() {
	err=$("$VYREFS" --self-check -o backend=cuda,ordinal=63 2>&1 >/dev/null)
	assertEquals 1 $?
	assertContains "$err" "ordinal 63 is not a CUDA device"
	assertContains "$err" "(Fix: "
}

. tests/shunit.sh
