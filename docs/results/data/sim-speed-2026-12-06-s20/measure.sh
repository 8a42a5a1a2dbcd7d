#!/bin/bash
# measure.sh OUT ROUNDS: the every-node row as `python -m mkernel run` under /usr/bin/time, alternating
# compiled (the s20l tree's install), python (the same install, -X mkernel-pure) and base (main at 71524a0, pure)
out=$1; rounds=${2:-5}; unset PYTHONDONTWRITEBYTECODE
row="run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse"
for i in $(seq $rounds); do
  for tag in compiled python base; do
    case $tag in
      compiled) cd /work/s20l; py="/work/s20l-venv/bin/python";;
      python) cd /work/s20l; py="/work/s20l-venv/bin/python -X mkernel-pure";;
      base) cd /work/b20; py="env PYTHONPATH=/work/b20 /work/main/.venv/bin/python";;
    esac
    /usr/bin/time -f "$i $tag %U %S %e" -a -o $out $py -m mkernel $row > /dev/null
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
done
