#!/usr/bin/env bash
# The GPU machine has no package registry and lacks tools some suites use
# (getfattr/setfattr, rsync, pgrep where procps is missing, and mount.fuse3
# where mount(8) looks for it).
#   scripts/gpu-test-tools.sh fetch     here: download the .debs into .device/tools
#   . scripts/gpu-test-tools.sh install there, after `. .device/gpu-env.sh`
# Without them those tests are skipped (and counted as skipped), not failed,
# except the daemon-gone checks, which fail without pgrep (a check that
# cannot look must not pass). The system's own tools come first on PATH.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$here/.device/tools"
case "${1:-}" in
fetch)
	mkdir -p "$tools" && (cd "$tools" && apt-get download attr rsync libpopt0 procps libproc2-0) && ls "$tools"
	;;
install)
	for deb in "$tools"/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" /tmp/root; done
	# mount(8) runs helpers from /sbin, with a clean environment (no
	# LD_LIBRARY_PATH): register the unpacked libraries and link the helper.
	# This machine is throwaway.
	echo /tmp/root/lib/x86_64-linux-gnu >/etc/ld.so.conf.d/vyrefs-test.conf
	echo /tmp/root/usr/lib/x86_64-linux-gnu >>/etc/ld.so.conf.d/vyrefs-test.conf
	ldconfig
	for helper in mount.fuse3 mount.fuse; do
		[ -e /sbin/$helper ] || ln -sf /tmp/root/sbin/mount.fuse3 /sbin/$helper
	done
	export PATH=$PATH:/tmp/root/usr/bin
	;;
*)
	echo "usage: scripts/gpu-test-tools.sh fetch|install" >&2
	;;
esac
