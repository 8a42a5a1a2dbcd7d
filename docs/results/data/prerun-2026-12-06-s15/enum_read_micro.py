"""An enum member read off its class (Op.GEMM) against a module alias, 200k times in a function: callgrind Ir.
usage: python enum_read_micro.py attr|glob"""
import sys
from mkernel.ir import Op
GEMM = Op.GEMM
N=200000
def f(op):
    n = 0
    for i in range(N):
        if op is Op.GEMM: n += 1
    return n
def g(op):
    n = 0
    for i in range(N):
        if op is GEMM: n += 1
    return n
{'attr': f, 'glob': g}[sys.argv[1]](Op.COPY)
