# Shared by the tier suites (sourced after tests/fs/lib.sh): DIR, the
# backing directory, and WORK, the test's own files beside it, both on
# disk under /var/tmp (tmpfs takes no O_DIRECT before Linux 6.6), made
# fresh for each test.
DIR=""
WORK=""
MB=1048576
UNIT=$((2 * MB))

setUp() {
	DIR=$(mktemp -d /var/tmp/vyrefs-dir.XXXXXX) || return 1
	WORK=$(mktemp -d /var/tmp/vyrefs-work.XXXXXX) || return 1
	chmod 755 "$DIR"
}

# A user's xattr of a file on the mount, its value alone.
xattr_of() { getfattr -n "$2" --only-values "$1" 2>/dev/null; }
