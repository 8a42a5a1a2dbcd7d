#!/bin/bash
# usage: runrows.sh TREE OUTDIR ROW...  : each row as `mkernel run ... --json` under /usr/bin/time -v
# TREE is the branch's worktree, or a `git archive` of main with mkernel/{sim,hw,scenarios} linked
# to its top-level folders (the venv's editable install maps those to the branch otherwise).
tree=$1; out=$2; shift 2
mkdir -p $out
PY=$(cd $(dirname $0)/../../../.. && pwd)/.venv/bin/python  # the branch's venv, for both trees
cd $tree
BIG="scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048"
for row in "$@"; do
  case $row in
    collapsed) args="run $BIG --collapse";;
    64-nodes) args="run $BIG --nodes 64 --collapse";;
    ring) args="run paper-efa-2x8 --kernel ring_attention --seq 12288 --n 64 --k 128 --collapse";;
    default) args="run";;
    moe) args="run scenarios/paper-ib-2x8.toml --kernel moe_dispatch_gemm --collapse";;
  esac
  /usr/bin/time -v -o $out/$row.time timeout 300 $PY -m mkernel $args --json $out/$row.json > $out/$row.stdout 2>&1
  u=$(grep 'User time' $out/$row.time | awk '{print $NF}'); s=$(grep 'System time' $out/$row.time | awk '{print $NF}'); w=$(grep 'Elapsed' $out/$row.time | awk '{print $NF}')
  echo "$row cpu=$(echo "$u+$s" | bc) wall=$w load=$(cut -d' ' -f1 /proc/loadavg)"
done
