#!/bin/bash
# fingerprint of the worktree's code ($1: tag) against main's, strict on event counts too
cd /work/wt-simspeed && . .venv/bin/activate
D=docs/results/data/sim-event-path-2026-12-05
python $D/fingerprint.py /tmp/ad/fp-$1.npz > /tmp/ad/fp-$1.txt 2>&1
python $D/fingerprint_cmp.py /tmp/ad/fp-main.npz /tmp/ad/fp-$1.npz > /tmp/ad/fpcmp-$1.txt 2>&1
python - "$1" >> /tmp/ad/fpcmp-$1.txt <<'PY'
import sys, json, numpy as np
a, b = (json.loads(str(np.load(f"/tmp/ad/fp-{t}.npz")["meta"])) for t in ("main", sys.argv[1]))
ev = [(k, a[k]["events"], b[k]["events"]) for k in a if isinstance(a[k], dict)]
print("events", ev, "EVENTS SAME" if all(x == y for _, x, y in ev) else "EVENTS DIFFER")
PY
cat /tmp/ad/fp-$1.txt /tmp/ad/fpcmp-$1.txt
