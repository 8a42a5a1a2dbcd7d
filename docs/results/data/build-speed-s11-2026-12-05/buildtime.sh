#!/bin/bash
# Alternate base and branch, 3 rounds: buildtime.sh BASE_DIR BRANCH_DIR
S=$(cd "$(dirname "$0")" && pwd)/buildtime.py
for round in 1 2 3; do
  for dir in "$1" "$2"; do
    echo "round $round $dir: $(cd "$dir" && .venv/bin/python "$S" 3)"
  done
done
