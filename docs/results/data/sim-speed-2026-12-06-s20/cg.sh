#!/bin/bash
# cg.sh TAG: callgrind Ir of the whole every-node row (s18's row_nobar.py never), PYTHONHASHSEED=0, warm bytecode
tag=$1; unset PYTHONDONTWRITEBYTECODE
R=/work/s20l/docs/results/data/sim-speed-2026-12-06-s18/row_nobar.py
case $tag in
  compiled) cd /work/s20l; py="/work/s20l-venv/bin/python";;
  python) cd /work/s20l; py="/work/s20l-venv/bin/python -X mkernel-pure";;
  base) cd /work/b20; py="env PYTHONPATH=/work/b20 /work/main/.venv/bin/python";;
esac
$py $R never > /dev/null
PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg20-$tag.out $py $R never > /tmp/cg20-$tag.log 2>&1
echo "$tag $(grep -h 'Collected' /tmp/cg20-$tag.log | awk '{print $4}')"
