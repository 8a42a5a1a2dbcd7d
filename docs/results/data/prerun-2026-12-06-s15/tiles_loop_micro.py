"""30k calls making 8 regions each: a list comprehension (a) against the 8 calls written out (b), for callgrind Ir."""
import sys, gc
from mkernel.ir import new_region
gc.disable()
N=30000
ranks = list(range(8))
class T: __slots__=('row0','row1','col0','col1')
t=T(); t.row0, t.row1, t.col0, t.col1 = 0, 128, 0, 256
def a(buf, ranks, t):
    r0, r1, c0, c1 = t.row0, t.row1, t.col0, t.col1
    return tuple([new_region(buf, rank, r0, r1, c0, c1) for rank in ranks])
def b(buf, ranks, t):
    r0, r1, c0, c1 = t.row0, t.row1, t.col0, t.col1
    return (new_region(buf, ranks[0], r0, r1, c0, c1),new_region(buf, ranks[1], r0, r1, c0, c1),new_region(buf, ranks[2], r0, r1, c0, c1),new_region(buf, ranks[3], r0, r1, c0, c1),new_region(buf, ranks[4], r0, r1, c0, c1),new_region(buf, ranks[5], r0, r1, c0, c1),new_region(buf, ranks[6], r0, r1, c0, c1),new_region(buf, ranks[7], r0, r1, c0, c1))
x = [{"a": a, "b": b}[sys.argv[1]]("P", ranks, t) for i in range(N)]  # usage: python tiles_loop_micro.py a|b
