# Counts of the signal path of the row at M (flat_keys calls, keys, local/far entries, bump_keys keys by cell state).
# Run on base (cd /work/base && .venv/bin/python THIS 32768): it wraps engine.flat_keys, which gsig no longer calls.
import dataclasses, sys, collections
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend
import mkernel.sim.engine as se, mkernel.sim.signals as sg
sc = load_scenario("scenarios/paper-ib-2x8.toml")
size = int(sys.argv[1])
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=2048)
m, c, sim = builders.get("gemm_ar"), sc.cluster, SimBackend()
with ir.paused_gc():
    fused = m.build(w, c, grouped=True)
    table = fused.validate(races=True)
S = collections.Counter()
orig_fk = sg.flat_keys
def fk(t, first=0, n=None):
    r = orig_fk(t, first, n)
    S['fk calls'] += 1; S['fk keys'] += len(r[0]); S[f'fk op={t.op.value} whole={first==0 and (n is None or n==t.count)}'] += 1
    S[f'fk times={r[1]} rep={r[2]}'] += 1
    S[f'fk distinct ranks={len(set(k[0] for k in r[0]))}'] += 1
    S[f'fk nsig={len(t.signals)} period={bool(t.step.period) if t.count>1 else None}'] += 1
    S['fk distinct keys'] += len(set(r[0]))
    return r
se.flat_keys = fk
orig_sig = se.Model._signal
seen = collections.Counter()
def sig(self, run, paid):
    ents = list(run.entries())
    S[f'signal paid={paid} op={run.task.op.value} entries={min(len(ents),3)}'] += 1
    for t, f, n in ents: seen[(id(t), f, n)] += 1
    rank = run.task.rank
    for t, f, n in ents:
        keys = orig_fk(t, f, n)[0]
        loc = sum(k[0] == rank for k in keys)
        S[f'entry local={"all" if loc==len(keys) else ("none" if loc==0 else "mixed")} paid={paid}'] += 1
    return orig_sig(self, run, paid)
se.Model._signal = sig
orig_bump = sg.SignalBoard.bump_keys
def bump(self, keys, times=1, repeat=1):
    S['bump calls'] += 1; S['bump keys'] += len(keys)
    for k in keys:
        cell = self.cells.get(k)
        S['key nocell' if cell is None else ('key cell nowait' if cell[1] is None else f'key waiters={min(len(cell[1]),3)}')] += 1
    prev = None; runs = 0
    for k in keys:
        if k != prev: runs += 1
        prev = k
    S['bump key-runs'] += runs
    return orig_bump(self, keys, times, repeat)
sg.SignalBoard.bump_keys = bump
st = sim.run(fused, c, collapse=False, regions=table)
print(st.events)
for k, v in sorted(S.items()): print(k, v)
print('entry spans signalled more than once', sum(1 for v in seen.values() if v > 1), len(seen))
