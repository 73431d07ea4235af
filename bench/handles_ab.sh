#!/usr/bin/env bash
# A handle's cost, two vyrefs binaries side by side in one run: open+close
# of a 4 KiB file and a readdir of 100 entries (bench/vybench opens,
# readdir), in ROUNDS rounds that alternate which binary goes first, each
# a median of N; prints each figure's median and best over the rounds, the
# ratios NEW / OLD (under 1: NEW is faster), and the median of each
# round's own ratio: on a busy machine the rounds spread widely, and two
# runs back to back share the load best.
#   bench/handles_ab.sh OLD_VYREFS NEW_VYREFS [N] [ROUNDS]
# BENCH_BACKEND: the backend both mount (default host). Needs root or
# fusermount3; mounts under TMPDIR and unmounts what it mounted.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench/handles_ab.sh OLD_VYREFS NEW_VYREFS [N] [ROUNDS]" >&2; exit 2; }
old=$1 new=$2 n=${3:-5000} rounds=${4:-7}
here=$(cd "$(dirname "$0")/.." && pwd)
vybench=$here/${BUILD:-build}/bench/vybench
[ -x "$vybench" ] || { echo "bench/handles_ab.sh: no $vybench (Fix: make $vybench)" >&2; exit 1; }
root=$(mktemp -d "${TMPDIR:-/tmp}/vyhandles.XXXXXX")
declare -A pid mnt
cleanup() {
	for t in "${!mnt[@]}"; do
		fusermount3 -u "${mnt[$t]}" 2>/dev/null || umount "${mnt[$t]}" 2>/dev/null || true
		wait "${pid[$t]}" 2>/dev/null || true
	done
	rm -rf "$root"
}
trap cleanup EXIT
for t in old new; do
	m=$root/$t
	mkdir "$m"
	bin=$old
	[ $t = new ] && bin=$new
	"$bin" -f -o "backend=${BENCH_BACKEND:-host}" "$m" 2>>"$root/$t.log" &
	pid[$t]=$!
	mnt[$t]=$m
	for _ in $(seq 200); do
		mountpoint -q "$m" && break
		kill -0 "${pid[$t]}" 2>/dev/null || { echo "$bin did not mount: $(cat "$root/$t.log")" >&2; exit 1; }
		sleep 0.05
	done
	mountpoint -q "$m" || { echo "$bin did not mount within 10 s" >&2; exit 1; }
	mkdir "$m/dir"
	for i in $(seq 100); do : >"$m/dir/f$i"; done
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
least() { printf '%s\n' "$@" | sort -g | head -1; }
declare -A runs
for r in $(seq "$rounds"); do
	order="old new"
	[ $((r % 2)) = 0 ] && order="new old"
	for t in $order; do
		runs[$t.opens]+=" $("$vybench" opens "${mnt[$t]}/small" "$n")"
		runs[$t.readdir]+=" $("$vybench" readdir "${mnt[$t]}/dir" $((n / 10)))"
	done
done
for k in opens readdir; do
	# shellcheck disable=SC2086
	o=$(median ${runs[old.$k]}) w=$(median ${runs[new.$k]})
	echo "$k old_us $o new_us $w ratio $(awk -v a="$w" -v b="$o" 'BEGIN { printf "%.3f", a / b }')"
	# shellcheck disable=SC2086
	o=$(least ${runs[old.$k]}) w=$(least ${runs[new.$k]})
	echo "$k best old_us $o new_us $w ratio $(awk -v a="$w" -v b="$o" 'BEGIN { printf "%.3f", a / b }')"
	# Each round's two figures ran back to back, under the same load.
	# shellcheck disable=SC2086
	echo "$k paired ratio $(paste <(printf '%s\n' ${runs[new.$k]}) \
		<(printf '%s\n' ${runs[old.$k]}) | awk '{ print $1 / $2 }' | sort -g |
		awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] }')"
	echo "  rounds old:${runs[old.$k]}"
	echo "  rounds new:${runs[new.$k]}"
done
