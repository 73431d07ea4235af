# Shared by the suites that compare with another filesystem (posix_test,
# tier_test): the probe's script of every POSIX step. Sourced.
PROBE=${BUILD:-build}/tests/fs/posix_probe

# posix_script ROOT WHO: the probe's script in a fresh ROOT/w, as root or
# as uid 1000 (setpriv), after setting up what it needs root for.
posix_script() {
	local w="$1/w-$2" run=""
	mkdir "$w" && chmod 755 "$w"
	: >"$w/rootowned"
	mkdir "$w/sticky" && chmod 1777 "$w/sticky"
	: >"$w/sticky/rootfile" && chmod 666 "$w/sticky/rootfile"
	if [ "$2" = user ]; then
		chown 1000:1000 "$w"
		run="setpriv --reuid=1000 --regid=1000 --clear-groups"
	fi
	local probe
	probe=$(realpath "$PROBE")
	(cd / && $run "$probe" script "$w")
}
