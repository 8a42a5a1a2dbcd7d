#!/bin/bash
# usage: cgrow.sh TREE TAG : warm the bytecode cache in TREE, then callgrind the every-node row there
tree=$1; tag=$2
source /work/main/.venv/bin/activate
unset PYTHONDONTWRITEBYTECODE
export PYTHONPATH=$tree
cd $tree
python -m mkernel run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > /tmp/s18/warm-$tag.log 2>&1
PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/s18/cg-$tag.out python -m mkernel run scenarios/paper-ib-2x8.toml --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > /tmp/s18/cg-$tag.log 2>&1
grep Collected /tmp/s18/cg-$tag.log
