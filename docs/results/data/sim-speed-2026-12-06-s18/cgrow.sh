#!/bin/bash
# cgrow.sh TREE TAG: callgrind Ir of the whole every-node row (row_nobar.py never), PYTHONHASHSEED=0, bytecode cache
# warm (one plain run first); prints TAG and the instructions
here=$(cd "$(dirname "$0")" && pwd); py=${PY:-python}
unset PYTHONDONTWRITEBYTECODE
cd $1 && PYTHONPATH=$1 $py $here/row_nobar.py never > /dev/null
PYTHONHASHSEED=0 PYTHONPATH=$1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cgrow-$2.out $py $here/row_nobar.py never > /tmp/cgrow-$2.log 2>&1
echo "$2 $(grep -h 'Collected' /tmp/cgrow-$2.log | awk '{print $4}')"
