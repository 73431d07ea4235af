#!/usr/bin/env bash
# run.sh: alone (on the cuda backend it reads the whole GPU's free memory: the daemon's baseline at unmount, df or RSS)
# The vyrefs command line: help, version, options, the self-check on the
# backend under test, and clear errors (with a Fix hint) for bad input.
. tests/skip.sh
VYREFS=${VYREFS:-build/vyrefs}
backend=${VY_TEST_BACKEND:-host}

test_version_prints_name_and_number() {
	out=$("$VYREFS" --version)
	assertEquals 0 $?
	assertTrue "version line: $out" "[[ '$out' =~ ^vyrefs\ [0-9]+\.[0-9]+\.[0-9]+$ ]]"
}

# One number: the file VERSION, the binary, its man page and the Python
# module (whose pyproject.toml takes vyrefs.__version__).
test_one_version_for_binary_man_page_and_python_module() {
	local v
	v=$(cat VERSION)
	assertEquals "vyrefs $v" "$("$VYREFS" --version)"
	assertEquals "version $v" "$("$VYREFS" --build-info | grep '^version ')"
	assertContains "$(head -n 5 docs/vyrefs.8)" "\"vyrefs $v\""
	assertEquals "$v" "$(cd client/python && python3 -c 'import vyrefs; print(vyrefs.__version__)')"
	assertContains "$(cat client/python/pyproject.toml)" 'version = {attr = "vyrefs.__version__"}'
}

test_help_exits_zero_and_lists_options() {
	out=$("$VYREFS" --help)
	assertEquals 0 $?
	for key in backend= ordinal= host_memory= resident_budget= pool_budget= staging_cache= max_write= page_cache= kernel_cache= allow_other= config= --self-check fuse.vyrefs; do
		assertContains "help mentions $key" "$out" "$key"
	done
}

test_no_arguments_is_a_usage_error() {
	"$VYREFS" >/dev/null 2>&1
	assertEquals 2 $?
}

test_self_check_passes_on_backend_under_test() {
	out=$("$VYREFS" --self-check -o "backend=$backend,host_memory=256M" 2>&1)
	assertEquals "$out" 0 $?
	assertContains "$out" "backend $backend"
	assertContains "$out" "fused readback of 3 ranges: 1 copy, 1 sync: ok"
	assertContains "$out" "device memory back to baseline"
	assertContains "$out" "self-check passed"
}

test_self_check_with_pool_off_says_reuse_was_not_checked() {
	out=$("$VYREFS" --self-check -o "backend=$backend,host_memory=256M,pool_budget=0" 2>&1)
	assertEquals "$out" 0 $?
	assertContains "$out" "pool reuse: not checked"
	assertContains "$out" "pool_hits 0"
	assertContains "$out" "pool_bypasses 2"
	assertContains "$out" "self-check passed"
}

test_unknown_option_key_is_refused_with_fix() {
	err=$("$VYREFS" --self-check -o backend=host,bogus=1 2>&1 >/dev/null)
	assertEquals 2 $?
	assertContains "$err" "unknown option 'bogus'"
	assertContains "$err" "(Fix: "
}

test_bad_values_are_refused_with_fix() {
	for opt in backend=gpu ordinal=x host_memory=12Q resident_budget=0% pool_budget=-1 staging_cache=; do
		err=$("$VYREFS" --self-check -o "$opt" 2>&1 >/dev/null)
		assertEquals "$opt" 2 $?
		assertContains "$opt: $err" "$err" "(Fix: "
	done
}

test_budget_too_small_fails_cleanly() {
	err=$("$VYREFS" --self-check -o "backend=$backend,host_memory=64M,resident_budget=5M" 2>&1 >/dev/null)
	assertEquals 1 $?
	assertContains "$err" "no room for"
	assertContains "$err" "(Fix: "
}

test_cuda_without_gpu_says_what_to_do() {
	if cuda_built_in && { [ "$backend" = cuda ] || cuda_driver_here; }; then
		skip_test "a CUDA driver is installed: this checks machines without one"
	fi
	err=$("$VYREFS" --self-check -o backend=cuda 2>&1 >/dev/null)
	assertEquals 1 $?
	assertNoCudaRefusal "$err"
}

test_build_info_says_which_backends() {
	out=$("$VYREFS" --build-info)
	assertEquals 0 $?
	assertContains "$out" "host_backend yes"
	n=$(printf '%s\n' "$out" | grep -cx 'cuda_backend \(yes\|no\)')
	assertEquals "one cuda_backend yes|no line: $out" 1 "$n"
}

test_missing_mountpoint_is_refused_with_fix() {
	err=$("$VYREFS" -o backend=host /nonexistent/vyrefs-mnt 2>&1 >/dev/null)
	assertEquals 1 $?
	assertContains "$err" "cannot mount on /nonexistent/vyrefs-mnt"
	assertContains "$err" "(Fix: create the directory first"
}

test_bad_config_file_is_refused_with_line_and_fix() {
	conf=$(mktemp)
	printf '[vyrefs]\nbackend = host\npool_budget = lots\n' >"$conf"
	err=$("$VYREFS" -o "config=$conf" --self-check 2>&1 >/dev/null)
	assertEquals 2 $?
	assertContains "$err" "$conf line 3: bad value 'lots' for pool_budget"
	assertContains "$err" "(Fix: "
	printf '[other]\nbackend = host\n' >"$conf"
	err=$("$VYREFS" -o "config=$conf" --self-check 2>&1 >/dev/null)
	assertContains "$err" "unknown section [other]"
	rm -f "$conf"
	err=$("$VYREFS" -o "config=$conf" --self-check 2>&1 >/dev/null)
	assertEquals 2 $?
	assertContains "$err" "cannot read config file"
	err=$("$VYREFS" -o "config=/tmp" --self-check 2>&1 >/dev/null)
	assertEquals 2 $?
	assertContains "$err" "not a regular file"
}

test_options_override_the_config_file() {
	conf=$(mktemp)
	printf 'backend = cuda\nhost_memory = 64M\n' >"$conf"
	out=$("$VYREFS" -o "config=$conf,backend=host" --self-check 2>&1)
	assertEquals "$out" 0 $?
	assertContains "$out" "backend host: host memory, 67108864 bytes"
	rm -f "$conf"
}

test_unknown_mount_flag_is_refused() {
	err=$("$VYREFS" -o backend=host,frobnicate /tmp 2>&1 >/dev/null)
	assertEquals 2 $?
	assertContains "$err" "unknown option 'frobnicate'"
}

# A FIFO named as the config must not hang the mount, and a binary file is
# not read as settings.
test_config_must_be_a_regular_text_file() {
	d=$(mktemp -d) || return 1
	mkfifo "$d/fifo"
	printf '[vyrefs]\nbackend = host\n\0\001\002' >"$d/binary"
	err=$(timeout 5 "$VYREFS" --self-check -o "config=$d/fifo" 2>&1)
	assertEquals "refused at once, not hung (124)" 2 $?
	assertContains "$err" "is not a regular file"
	assertContains "$err" "(Fix: "
	err=$(timeout 5 "$VYREFS" --self-check -o "config=$d/binary" 2>&1)
	assertEquals 2 $?
	assertContains "$err" "is not text"
	rm -rf "$d"
}

. tests/shunit.sh
