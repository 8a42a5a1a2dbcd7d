#!/bin/bash
# usage: cg.sh TREE M  -> prints tree, Ir, fused us, events
t=$1; M=${2:-16384}
FLAGS=/work/notes/cg M=$M bash $t/docs/results/data/every-node-5-2026-12-05/callgrind.sh $t
