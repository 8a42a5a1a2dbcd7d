#!/bin/bash
# usage: cg.sh TREE LABEL -> appends "label tree Ir us events" to ${OUT:-/dev/stdout}
t=$1; lab=$2
r=$(FLAGS=${FLAGS:-/tmp} M=16384 bash $t/docs/results/data/every-node-5-2026-12-05/callgrind.sh $t)
echo "$lab $r" >> ${OUT:-/dev/stdout}
