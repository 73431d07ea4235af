#!/bin/bash
# smallfiles probe: create, write 700 B, close 3,000 files, then unlink them;
# the best of 3 rounds in us a file, for the vyrefs binary given.
#   bench/probes/smallfiles/churn.sh OLD/vyrefs; bench/probes/smallfiles/churn.sh build/vyrefs
bin=$1; M=$(mktemp -d /tmp/sb.XXXX)
$bin -o backend=host,host_memory=1G $M || exit 1
python3 - "$M" <<'PY'
import os, sys, time
m = sys.argv[1]; d = b"x" * 700
best = []
for r in range(3):
    t = time.perf_counter()
    for i in range(3000):
        fd = os.open(f"{m}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644); os.write(fd, d); os.close(fd)
    for i in range(3000):
        os.unlink(f"{m}/f{i}")
    best.append(time.perf_counter() - t)
print(f"{min(best)*1e6/3000:.1f} us/file (best of 3)")
PY
umount $M; rmdir $M
