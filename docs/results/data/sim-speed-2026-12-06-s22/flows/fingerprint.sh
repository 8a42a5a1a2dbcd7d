#!/bin/bash
# fingerprint.sh TREE: the every-node row's fingerprint (sim-event-path-2026-12-05/fingerprint.py) on TREE's compiled
# core and on its Python core (-X mkernel-pure), each compared with the base's (/tmp/h22f-fp-BASE.npz, made once
# from /work/main: cd /work/main && .venv/bin/python docs/results/data/sim-event-path-2026-12-05/fingerprint.py
# /tmp/h22f-fp-BASE.npz) by s20's fingerprint_cmp_core.py.
tree=$1; py=/work/main/.venv/bin/python; d=/work/main/docs/results/data
cd $tree && export PYTHONPATH=$tree
for core in compiled pure; do
  opt=""; [ $core = pure ] && opt="-X mkernel-pure"
  $py $opt -c "import mkernel.sim as s; print('$core:', s.native.state, s.__file__)"
  $py $opt $d/sim-event-path-2026-12-05/fingerprint.py /tmp/h22f-fp-$core.npz > /dev/null
  $py $d/sim-speed-2026-12-06-s20/fingerprint_cmp_core.py /tmp/h22f-fp-BASE.npz /tmp/h22f-fp-$core.npz
done
