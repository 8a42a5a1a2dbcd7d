#!/bin/sh
# validate() CPU time, base and branch alternately (ROUNDS rounds, default 3), each on a fresh build.
# usage: alternate.sh BASE_DIR BRANCH_DIR [ROUNDS]
base=$1; branch=$2; rounds=${3:-3}
script=$(cd "$(dirname "$0")" && pwd)/vtime.py
for i in $(seq "$rounds"); do
  (cd "$base" && echo "base $i $(.venv/bin/python "$script" 1)")
  (cd "$branch" && echo "branch $i $(.venv/bin/python "$script" 1)")
done
