#!/usr/bin/env bash
# A mount with survive=on holding FILES files and one BIG file: kill -9 the
# daemon, then time the first answer (takeover_us) and check every byte.
# Usage: files_probe.sh BACKEND FILES BIG_MIB   (root, from the repository)
set -eu
backend=$1 files=$2 big=$3
M=$(mktemp -d /tmp/vyrefs-probe.XXXXXX)
build/vyrefs -o "backend=$backend,survive=on" vyrefs "$M"
mkdir "$M/many"
for i in $(seq 1 "$files"); do echo "$i" > "$M/many/f$i"; done
head -c $((big << 20)) /dev/urandom > /tmp/probe.big && cp /tmp/probe.big "$M/big"
sum=$(md5sum < /tmp/probe.big)
echo "records $(awk '$1=="kept_records"{print $2}' "$M/.vyre/stats") checkpoints $(awk '$1=="kept_checkpoints"{print $2}' "$M/.vyre/stats")"
old=$(awk '$1=="pid"{print $2}' "$M/.vyre/stats")
kill -9 "$old"
until [ "$(awk '$1=="pid"{print $2}' "$M/.vyre/stats" 2>/dev/null)" != "$old" ]; do :; done
echo "takeover_us $(awk '$1=="takeover_us"{print $2}' "$M/.vyre/stats")"
echo 3 > /proc/sys/vm/drop_caches
[ "$(md5sum < "$M/big")" = "$sum" ] && echo "big: every byte back" || echo "big: BYTES DIFFER"
n=0; for i in $(seq 1 "$files"); do [ "$(cat "$M/many/f$i")" = "$i" ] && n=$((n + 1)); done
echo "small files back: $n of $files"
grep -h "takeover" "$M.log" 2>/dev/null || true
fusermount3 -u "$M"; rm -f /tmp/probe.big; rmdir "$M"
