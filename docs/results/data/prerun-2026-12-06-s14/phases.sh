#!/bin/bash
# callgrind Ir of the every-node row stopped at each of STOPS (stop.py here), on TREE's interpreter, with the
# bytecode cache (as a user has it); each stop's total in /tmp/prerun-TAG-STOP.log. A phase's Ir is the
# difference of consecutive stops (begin, build, validate, init).
# usage: phases.sh TREE TAG STOPS...   e.g. phases.sh /work/base base begin build validate init
unset PYTHONDONTWRITEBYTECODE
here=$(dirname "$(readlink -f "$0")")
tree=$1; tag=$2; shift 2
cd "$tree"
for p in "$@"; do
  valgrind --tool=callgrind --callgrind-out-file=/tmp/prerun-$tag-$p.out "$tree/.venv/bin/python" "$here/stop.py" $p > /tmp/prerun-$tag-$p.log 2>&1
  echo "$tag $p $(grep -h Collected /tmp/prerun-$tag-$p.log | awk '{print $4}')"
done
