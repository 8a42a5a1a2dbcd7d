#!/bin/bash
# callgrind Ir of the ring attention bench row (the whole CLI command, bytecode cache present), on TREE (PYTHONPATH)
# usage: PY=python cgra.sh TREE TAG
unset PYTHONDONTWRITEBYTECODE
cd $1 && PYTHONPATH=$1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cgra-$2.out ${PY:-python} -m mkernel run \
  paper-efa-2x8 --kernel ring_attention --seq 12288 --n 64 --k 128 > /tmp/cgra-$2.log 2>&1
echo "$2 $(grep -h 'Collected' /tmp/cgra-$2.log | awk '{print $4}')"
