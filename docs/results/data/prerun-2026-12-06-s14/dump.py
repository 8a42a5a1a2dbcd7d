"""dump the every-node row's pre-run products: the fused and baseline schedules' task hash, validate's tables, the tracker's arrays"""
import sys, dataclasses, hashlib, pickle, numpy as np
import mkernel.builders.gemm_ar as g
from mkernel.scenario import load_scenario
from mkernel.sim.hazardlog import LoggedTracker
sc = load_scenario('scenarios/paper-ib-2x8.toml')
w = dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048)
out = {}
s = g.build(w, sc.cluster, grouped=True)
b = g.build_baseline(w, sc.cluster, grouped=True, library_tasks=False)
for name, x in (('fused', s), ('baseline', b)):
    out[name + '_tasks'] = np.frombuffer(hashlib.sha256(pickle.dumps(x, protocol=4)).digest(), np.uint8)
    recs, f, codes = x.validate()
    out[name + '_recs'] = recs; out[name + '_codes'] = np.array(sorted(codes.items()), dtype=object).astype(str)
    for k, v in f.items(): out[f'{name}_f_{k}'] = v
    tr = LoggedTracker(x, (recs, f, codes))
    c = tr.cells
    for k, v in vars(c).items():
        if isinstance(v, np.ndarray): out[f'{name}_cells_{k}'] = v
    for side in ('read', 'write'):
        for k, v in vars(getattr(c, side)).items():
            if isinstance(v, np.ndarray): out[f'{name}_{side}_{k}'] = v
from mkernel.signal_table import signal_table
from mkernel.screen import cleared
from mkernel.members import Entries, read_regions
from mkernel.validate import _homes
for name, x in (('fused', s), ('baseline', b)):
    e = Entries(x.tasks)
    keys = signal_table(x, _homes(x), e)
    for k, v in vars(keys).items():
        out[f'{name}_sig_{k}'] = np.asarray(v)
    out[f'{name}_cleared'] = cleared(x, read_regions(x), keys, e)
np.savez(sys.argv[1], **out)
print(len(out), 'arrays')
