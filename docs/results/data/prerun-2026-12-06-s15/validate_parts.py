"""The row's fused build, then validate()'s phases one after another, stopped after one (callgrind Ir by difference):
usage: python validate_parts.py entries|regions|signals|cleared|cycles|outputs"""
import sys, dataclasses, os, importlib, gc
import mkernel.builders.gemm_ar as g
from mkernel.scenario import load_scenario
from mkernel.members import Entries, region_table, _records
from mkernel.signal_table import signal_table
from mkernel.screen import cleared
from mkernel.coverage import check_outputs
V = importlib.import_module("mkernel.validate")
sc = load_scenario('scenarios/paper-ib-2x8.toml')
w = dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048)
s = g.build(w, sc.cluster, grouped=True)
gc.disable()
stop = sys.argv[1]
e = Entries(s.tasks)
if stop == 'entries': os._exit(0)
tab = region_table(s, e)
if stop == 'regions': os._exit(0)
keys = signal_table(s, None, e)
if stop == 'signals': os._exit(0)
pl = cleared(s, tab, keys, e)
if stop == 'cleared': os._exit(0)
V._check_signals(s, keys)
V._check_cycles(s, keys)
if stop == 'cycles': os._exit(0)
check_outputs(s, {b.name: b for b in s.buffers}, tab, keys.count)
if stop == 'outputs': os._exit(0)
