"""The row's fused GEMM+AR build (tile grid made first), with one part stubbed out, for callgrind Ir by difference:
usage: python build_parts.py none|full|nointra|noex|nodrain|notiles|noadd (none: imports and the tile grid only)."""
import sys, dataclasses, os
import mkernel.builders.gemm_ar as g
from mkernel.builders import _tiling
from mkernel.scenario import load_scenario
sc = load_scenario('scenarios/paper-ib-2x8.toml')
w = dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048)
_tiling.tile_grid(w.m, w.n, w.tile_m, w.tile_n)
mode = sys.argv[1]
if mode == 'nointra': g._intra_queue = lambda *a, **k: None
if mode == 'noex': g.direct_exchange = lambda *a, **k: None
if mode == 'nodrain': g._drain = lambda *a, **k: None
import mkernel.builders._gemm_ar_net as net
from mkernel.schedule_builder import ScheduleBuilder
if mode == 'notiles': net.Regions.tiles = lambda self, b, r, t: ()
if mode == 'noadd': ScheduleBuilder.add_group = lambda self, *a: None

if mode != 'none': s = g.build(w, sc.cluster, grouped=True)
os._exit(0)
