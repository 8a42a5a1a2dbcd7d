"""Ir of reading 438,304 synthetic regions' fields, one way per run (run under callgrind, less the run of NONE):
usage: python read_micro.py NONE|LC1|LC1S|LC1A|LC1F|LC5|LCT|LCT2|G|GL|GL2|GL3"""
import sys, numpy as np, struct
from itertools import chain
from operator import attrgetter
from mkernel.ir import Region, new_region
import gc; gc.disable()
regions = [new_region("OUT" if i % 3 else "P", i % 16, i * 128 % 32768, i * 128 % 32768 + 128, i % 7 * 256, i % 7 * 256 + 256) for i in range(438304)]
n = len(regions)
def NONE(): pass
def LC1(): return [r.row0 for r in regions]
def LC1S(): return np.frombuffer(struct.pack(f'{n}i', *[r.row0 for r in regions]), np.int32)
def LC1A(): return np.array([r.row0 for r in regions], np.int32)
def LC1F(): return np.fromiter([r.row0 for r in regions], np.int32, n)
def LC5():
    out = np.empty((5, n), np.int32)
    out[0] = np.frombuffer(struct.pack(f'{n}i', *[r.rank for r in regions]), np.int32)
    out[1] = np.frombuffer(struct.pack(f'{n}i', *[r.row0 for r in regions]), np.int32)
    out[2] = np.frombuffer(struct.pack(f'{n}i', *[r.row1 for r in regions]), np.int32)
    out[3] = np.frombuffer(struct.pack(f'{n}i', *[r.col0 for r in regions]), np.int32)
    out[4] = np.frombuffer(struct.pack(f'{n}i', *[r.col1 for r in regions]), np.int32)
    return out
def LCT():
    vals = [x for r in regions for x in (r.rank, r.row0, r.row1, r.col0, r.col1)]
    return np.frombuffer(struct.pack(f'{len(vals)}i', *vals), np.int32)
def LCT2():
    t = [(r.rank, r.row0, r.row1, r.col0, r.col1) for r in regions]
    return np.frombuffer(struct.pack(f'{5*n}i', *chain.from_iterable(t)), np.int32)
from operator import attrgetter
class Codes(dict):
    def __missing__(self, name):
        code = self[name] = len(self); return code
codes = Codes({"OUT": 0, "P": 1})
bf = attrgetter("buffer")
def G(): return np.fromiter(map(codes.__getitem__, map(bf, regions)), np.int32, n)
def GL():
    out = np.empty(n, np.int32); struct.pack_into(f'={n}i', out, 0, *[codes[r.buffer] for r in regions]); return out
def GL2():
    out = np.empty(n, np.int32); struct.pack_into(f'={n}i', out, 0, *map(codes.__getitem__, [r.buffer for r in regions])); return out
def GL3():
    c = dict(codes)
    out = np.empty(n, np.int32); struct.pack_into(f'={n}i', out, 0, *[c[r.buffer] for r in regions]); return out
globals()[sys.argv[1]]()
