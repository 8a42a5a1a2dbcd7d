#!/bin/sh
# Throwaway what-if (not a build path): the installed layout of this checkout copied to $1, the run's nine
# sim modules patched for mypy (mypyc-run.patch: annotations, `# type: ignore`s, one native_class=False)
# and compiled with mypyc 2.4.1 (pip install mypy==2.4.1). Run a script on it with
#   PYTHONPATH=$1 python SCRIPT   (sitecustomize.py there drops the editable install's finder)
# usage: build_tree.sh OUT_DIR   (from the repository root, venv active)
set -e
out=$1; here=$(dirname "$0")
rm -rf "$out"; mkdir -p "$out"
cp -r mkernel "$out/mkernel"; cp -r sim "$out/mkernel/sim"; cp -r hw "$out/mkernel/hw"; cp -r scenarios "$out/mkernel/scenarios"
find "$out" -name __pycache__ -prune -exec rm -rf {} +
(cd "$out/mkernel" && patch -p1 -s) < "$here/mypyc-run.patch"
cp "$here/mypy.ini" "$out/"
printf 'import sys\nsys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]\n' > "$out/sitecustomize.py"
cd "$out"
mods=""; for m in signals dispatch engine flows maxmin network sms tiles proxy; do mods="$mods mkernel/sim/$m.py"; done
python - $mods <<'PY'
import sys
from setuptools import setup
from mypyc.build import mypycify
mods = sys.argv[1:]
sys.argv[1:] = ["build_ext", "--inplace"]
setup(name="mkc", ext_modules=mypycify(["--config-file", "mypy.ini"] + mods, opt_level="3"))
PY
