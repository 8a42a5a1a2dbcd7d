#!/bin/bash
PY=/work/wt-simspeed/.venv/bin/python
cd /tmp/fs/base
echo "base load $(cut -d' ' -f1 /proc/loadavg) $(date +%T)"
PYTHONPATH=/tmp/fs/base /usr/bin/time -f "base wall %e s user %U s sys %S s" $PY -m mkernel sweep --grid scaling --workers 2 --out /tmp/fs/sweep-base > /tmp/fs/sweep-base.log 2>&1
tail -1 /tmp/fs/sweep-base.log
cd /work/wt-simspeed
echo "branch load $(cut -d' ' -f1 /proc/loadavg) $(date +%T)"
/usr/bin/time -f "branch wall %e s user %U s sys %S s" $PY -m mkernel sweep --grid scaling --workers 2 --out /tmp/fs/sweep-branch > /tmp/fs/sweep-branch.log 2>&1
tail -1 /tmp/fs/sweep-branch.log
echo "end load $(cut -d' ' -f1 /proc/loadavg) $(date +%T)"
