#!/bin/bash
# usage: bfast-ir.sh TAG -> per-build Ir of a snapshot of the worktree's mkernel (builds 3 minus builds 1, halved)
snap=/tmp/bfast-snap-$1; rm -rf $snap; mkdir -p $snap; cp -r /work/wt-bfast/mkernel $snap/
cd /work/wt-bfast
ir() { PYTHONPATH=$snap valgrind --tool=callgrind --callgrind-out-file=/tmp/bfast-cg.$$.$1 .venv/bin/python /work/wt-bfast/docs/results/data/build-speed-s11-2026-12-05/build_n.py $1 2>&1 | grep -o "Collected : [0-9]*" | grep -o "[0-9]*"; }
a=$(ir 1); b=$(ir 3); echo "$1 $(( (b - a) / 2 ))"
rm -f /tmp/bfast-cg.$$.*
