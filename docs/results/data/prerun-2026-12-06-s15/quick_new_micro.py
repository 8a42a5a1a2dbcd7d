"""200k regions by mkernel.ir.new_region (q), by a function storing into a plain-slots class (mk), and by a function storing
into a settable subclass (mk3: quick_new.patch's way); each checked equal and of type Region. usage: python quick_new_micro.py none|q|mk|mk3"""
import sys, gc
from mkernel.ir import new_region, Region
gc.disable()
N=200000
class Sub(Region):
    __slots__ = ()
    __setattr__, __delattr__ = object.__setattr__, object.__delattr__
def mk(buffer, rank, row0, row1, col0, col1, _new=object.__new__, _F=new_region, _R=Region):
    o=_new(_F); o.buffer=buffer; o.rank=rank; o.row0=row0; o.row1=row1; o.col0=col0; o.col1=col1
    o.__class__=_R; return o
def mk3(buffer, rank, row0, row1, col0, col1, _new=object.__new__, _F=Sub, _R=Region):
    o=_new(_F); o.buffer=buffer; o.rank=rank; o.row0=row0; o.row1=row1; o.col0=col0; o.col1=col1
    o.__class__=_R; return o
f = {'q':new_region,'mk':mk,'mk3':mk3,'none':None}[sys.argv[1]]
if f: x=[f("P", i & 15, i, i+128, 0, 256) for i in range(N)]
else: x=[("P", i & 15, i, i+128, 0, 256) for i in range(N)]
if f: assert all(type(r) is Region for r in x) and x[7] == Region("P", 7, 7, 135, 0, 256) and hash(x[7]) == hash(Region("P", 7, 7, 135, 0, 256))
