#!/bin/bash
# usage: cgpre.sh TREE TAG : callgrind of the every-node row's pre-run (build, validate, Model set-up; /tmp/s18/prerun.py stops at Model.run)
tree=$1; tag=$2
source /work/main/.venv/bin/activate; unset PYTHONDONTWRITEBYTECODE; export PYTHONPATH=$tree; cd $tree
python /tmp/s18/prerun.py > /dev/null 2>&1
PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/s18/cgpre-$tag.out python /tmp/s18/prerun.py > /tmp/s18/cgpre-$tag.log 2>&1
echo "$tag $(grep Collected /tmp/s18/cgpre-$tag.log)"
