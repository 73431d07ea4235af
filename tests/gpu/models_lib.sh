# Shared by the suites of whole models from a cuda mount (gpu_attach_test,
# gpu_families_test, gpu_share_test): the client library and module, a
# mount and a scratch directory in /dev/shm per test. Sourced.
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python:$PWD/tests/client${PYTHONPATH:+:$PYTHONPATH}
CHECK=tests/gpu/attach_check.py

have() { python3 -c "import $1" 2>/dev/null; }

setUp() {
	mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
	TMP=$(mktemp -d /dev/shm/vyrefs-models.XXXXXX)
}

tearDown() {
	rm -rf "$TMP"
	unmount_vyrefs
}
