import sys, dataclasses, gc
sys.path.insert(0, "/tmp/s18")
from lprof import LP
from mkernel import builders, ir, races, validation as V, members, signal_table as ST, screen, coverage
from mkernel.members import Entries, region_table
from mkernel.scenario import load_scenario
from mkernel.sim import cellgrid, gridedges
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    fused = mk.build(w, c, grouped=True)
s = fused
funcs = {"members": [members.region_table, members._records, members.shared_rows, members.distinct, members.Entries.__init__],
  "signal": [ST.signal_table, ST._bumps, ST._waits, ST._dense],
  "screen": [screen.cleared, screen._groups, screen._arity, screen._regions, screen._masks],
  "cycles": [races.acyclic, V._check_cycles, V.validate, coverage.check_outputs, coverage._MemberWrites.__init__, coverage._check_coverage, coverage._edges],
  "cells": [cellgrid.Cells.__init__, cellgrid.Cells._layout, cellgrid.Cells._edges, cellgrid.Cells._cells, cellgrid.Cells._own, cellgrid._Rows.__init__, cellgrid._Rows.along, cellgrid._pairs, gridedges.Edges._build, gridedges.Slots.index, gridedges.Slots.keys, cellgrid.Stepped.keys, members.member_slots]}[sys.argv[1]]
tab = V.validate(s)  # warm
gc.disable()
with LP(*funcs) as lp:
    if sys.argv[1] == "cells":
        cellgrid.Cells(s, tab)
    else:
        V.validate(s)
lp.report(int(sys.argv[2]) if len(sys.argv) > 2 else 30)
