#!/bin/bash
# cgrow with PYTHONHASHSEED=0 (string hashes fixed: the same dict and set layouts run to run): TREE TAG
unset PYTHONDONTWRITEBYTECODE
cd $1 && PYTHONHASHSEED=0 PYTHONPATH=$1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cgrow0-$2.out ${PY:-python} -m mkernel run scenarios/paper-ib-2x8.toml \
  --kernel gemm_ar --m 32768 --n 32768 --k 2048 --no-collapse > /tmp/cgrow0-$2.log 2>&1
echo "$2 $(grep -h 'Collected' /tmp/cgrow0-$2.log | awk '{print $4}')"
