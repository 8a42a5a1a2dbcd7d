"""validate() alone under callgrind: the row's fused build, pickled by mkpk.py, loaded, then validated inside
functools.reduce, a C function nothing else here calls, so that
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce python cg.py PICKLE
counts validate()'s instructions only. usage: cg.py PICKLE"""
import functools
import gc
import pickle
import sys

import mkernel.validate  # noqa: F401 (imported before collection starts)

gc.disable()
s = pickle.load(open(sys.argv[1], "rb"))
functools.reduce(lambda a, b: b.validate(), [s], None)
