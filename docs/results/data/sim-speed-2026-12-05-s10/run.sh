for i in 1 2 3; do
  for side in main base; do
    if [ $side = main ]; then d=/work/main; else d=/work/wt-rspush; fi
    (cd $d && . .venv/bin/activate && python tools/bench/bench_sim_speed.py --only full --out /tmp/b10/$side-$i.json > /tmp/b10/$side-$i.log 2>&1)
    echo "$side $i $(uptime | sed 's/.*load/load/')"
  done
done
cd /work/main && . .venv/bin/activate && python tools/bench/bench_sim_speed.py --skip sweep --out /tmp/b10/main-all.json > /tmp/b10/main-all.log 2>&1
echo DONE
