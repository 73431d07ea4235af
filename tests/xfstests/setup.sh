#!/usr/bin/env bash
# Point a built xfstests (github.com/kdave/xfstests; not a Debian package)
# at vyrefs and at tmpfs, as docs/fs.md ("xfstests generic quick beside
# tmpfs") ran them. As root:
#   tests/xfstests/setup.sh XFSTESTS_DIR [VYREFS_BINARY]
#   cd XFSTESTS_DIR && ./check -s vyrefs -g quick            (survive=off)
#   ./check -s vyrefs_survive -g quick                          (survive=on)
#   HOST_OPTIONS=$PWD/tmpfs.config ./check -g quick            (tmpfs)
# It writes /sbin/mount.fuse.vyrefs, XFSTESTS_DIR/local.config and
# tmpfs.config, makes the users xfstests wants, and edits XFSTESTS_DIR's
# common/rc in three places so vyrefs is treated as tmpfs (both keep
# files in memory): a cycle mount is a remount; _scratch_mkfs_sized
# gives resident_budget=SIZE; the mount type fuse.vyrefs counts as fuse.
set -euo pipefail
x=${1:?usage: tests/xfstests/setup.sh XFSTESTS_DIR [VYREFS_BINARY]}
vy=$(realpath "${2:-$(dirname "$0")/../../build/vyrefs}")
[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root (Fix: sudo $0 $*)" >&2; exit 1; }
[ -f "$x/common/rc" ] || { echo "setup.sh: $x is not an xfstests tree (Fix: git clone and make it first)" >&2; exit 1; }
[ -x "$vy" ] && [ -x "$(dirname "$vy")/vyrefs-keeper" ] ||
	{ echo "setup.sh: $vy and vyrefs-keeper beside it are needed (Fix: make)" >&2; exit 1; }

# mount(8) drops dev and suid (the kernel's defaults) before a helper sees
# them, and a FUSE mount is nodev,nosuid otherwise: asked for, as tmpfs
# has them, unless the options say no.
cat >/sbin/mount.fuse.vyrefs <<HELPER
#!/bin/sh
src=\$1 dir=\$2; shift 2
opts=""
if [ "\$1" = -o ]; then opts="\$2"; shift 2; fi
case ",\$opts," in *,nodev,*) ;; *) opts="\$opts,dev" ;; esac
case ",\$opts," in *,nosuid,*) ;; *) opts="\$opts,suid" ;; esac
exec $vy -o "\${opts#,}" "\$src" "\$dir" "\$@"
HELPER
chmod 755 /sbin/mount.fuse.vyrefs

mkdir -p /mnt/test /mnt/scratch /mnt/ttest /mnt/tscratch
opts="-obackend=host,allow_other,host_memory=8G"
{
	for s in vyrefs vyrefs_survive; do
		extra=""
		[ $s = vyrefs_survive ] && extra=",survive=on"
		printf '[%s]\nexport FSTYP=fuse\nexport FUSE_SUBTYP=.vyrefs\n' $s
		printf 'export TEST_DEV=vytest\nexport TEST_DIR=/mnt/test\n'
		printf 'export SCRATCH_DEV=vyscratch\nexport SCRATCH_MNT=/mnt/scratch\n'
		printf 'export TEST_FS_MOUNT_OPTS="%s%s"\nexport MOUNT_OPTIONS="%s%s"\n\n' "$opts" "$extra" "$opts" "$extra"
	done
} >"$x/local.config"
cat >"$x/tmpfs.config" <<'CFG'
export FSTYP=tmpfs
export TEST_DEV=tmpfs_test
export TEST_DIR=/mnt/ttest
export SCRATCH_DEV=tmpfs_scratch
export SCRATCH_MNT=/mnt/tscratch
export TEST_FS_MOUNT_OPTS="-o size=4G"
export MOUNT_OPTIONS="-o size=4G"
CFG

for u in fsgqa fsgqa2 123456-fsgqa; do id "$u" >/dev/null 2>&1 || useradd -m "$u"; done
getent group fsgqa >/dev/null || groupadd fsgqa

rc=$x/common/rc
if ! grep -q 'fuse.vyrefs' "$rc"; then
	python3 - "$rc" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
def once(old, new):
    global s
    if s.count(old) != 1:
        sys.exit("setup.sh: %s has changed where it is edited (%r): edit it by hand as docs/fs.md says" % (p, old[:40]))
    s = s.replace(old, new)
once("""    case "$FSTYP" in
    tmpfs)
        _scratch_remount "$opts"
""", """    case "$FSTYP$FUSE_SUBTYP" in
    tmpfs|fuse.vyrefs)
        _scratch_remount "$opts"
""")
once("""    case "$FSTYP" in
    tmpfs)
        return
""", """    case "$FSTYP$FUSE_SUBTYP" in
    tmpfs|fuse.vyrefs)
        return
""")
once("""		export MOUNT_OPTIONS="-o size=$fssize "$@" $TMPFS_MOUNT_OPTIONS"
		;;
""", """		export MOUNT_OPTIONS="-o size=$fssize "$@" $TMPFS_MOUNT_OPTIONS"
		;;
	fuse)
		[ "$FUSE_SUBTYP" = .vyrefs ] || _notrun "Filesystem $FSTYP not supported in _scratch_mkfs_sized"
		export MOUNT_OPTIONS="$MOUNT_OPTIONS,resident_budget=$fssize"
		;;
""")
once("""            -e 's/fuse.ceph-fuse/ceph-fuse/'""", """            -e 's/fuse.ceph-fuse/ceph-fuse/' -e 's/^fuse\\.vyrefs$/fuse/'""")
open(p, "w").write(s)
PY
fi
echo "xfstests at $x: ./check -s vyrefs -g quick (vyrefs), ./check -s vyrefs_survive -g quick, HOST_OPTIONS=$x/tmpfs.config ./check -g quick (tmpfs)"
