#!/bin/bash
# Three rounds of the every-node row, alternating merged main and base (94a7317), then every row but the sweep on main.
O=/work/notes/b11
for i in 1 2 3; do
  for side in main base; do
    if [ $side = main ]; then d=/work/main; py=python; else d=/work/base; py=/work/base/.venv/bin/python; fi
    (cd $d && $py tools/bench/bench_sim_speed.py --only full --out $O/$side-$i.json > $O/$side-$i.log 2>&1)
    echo "$side $i $(uptime | sed 's/.*load/load/')"
  done
done
cd /work/main && python tools/bench/bench_sim_speed.py --skip sweep --out $O/main-all.json > $O/main-all.log 2>&1
echo DONE
