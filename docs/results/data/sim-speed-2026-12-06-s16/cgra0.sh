#!/bin/bash
# cgra.sh with PYTHONHASHSEED=0: TREE TAG
unset PYTHONDONTWRITEBYTECODE
cd $1 && PYTHONHASHSEED=0 PYTHONPATH=$1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cgra0-$2.out ${PY:-python} -m mkernel run \
  paper-efa-2x8 --kernel ring_attention --seq 12288 --n 64 --k 128 > /tmp/cgra0-$2.log 2>&1
echo "$2 $(grep -h 'Collected' /tmp/cgra0-$2.log | awk '{print $4}')"
