#!/bin/bash
# callgrind Ir of the whole every-node CLI row (imports, build, validate, runs, table, teardown), on a tree's interpreter
# usage: cgrow.sh TREE PYTHON TAG
cd $1 && valgrind --tool=callgrind --callgrind-out-file=/tmp/cgrow-$3.out $2 -m mkernel run scenarios/paper-ib-2x8.toml \
  --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > /tmp/cgrow-$3.log 2>&1
echo "$3 $(grep -h 'Collected' /tmp/cgrow-$3.log | awk '{print $4}')"
