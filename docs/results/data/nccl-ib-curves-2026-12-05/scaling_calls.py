"""The scaling study's baseline NCCL calls and whether NCCL's channel shrink (mkernel.nccl_tuner.call_channels) moves
their time: per (testbed, kernel) the smallest size (the shrink acts only below a size), or with --gemm-rs every size of
gemm_rs on 32 x 8, 64 x 8 and NVL72 (where the smallest moved). Usage: scaling_calls.py results.json [--gemm-rs].
Each line: key, collective, bytes, ranks, NCCL's pick, time without the shrink, with it (us)."""
import json, sys, time, dataclasses
from mkernel import builders, nccl, nccl_tuner

rows = json.load(open(sys.argv[1]))
best = {}
for r in rows:
    if r.get('options'):
        continue
    g = (r['testbed'], r['kernel'])
    if g not in best or r['size'] < best[g]['size']:
        best[g] = r
rows = sorted(best.values(), key=lambda r: -r['nodes'])
if '--gemm-rs' in sys.argv:
    rows = [r for r in json.load(open(sys.argv[1])) if not r.get('options') and r['kernel'] == 'gemm_rs'
            and any(t in r['testbed'] for t in ('32x8', '64x8', 'nvl72'))]
real = nccl_tuner.call_channels
seen = {}
moved = []
skipped = []
t0 = time.time()
for r in rows:
    key = (r['testbed'], r['kernel'], r.get('m'), r.get('n'), r.get('k'), r.get('options'))
    sc = None
    try:
        from mkernel.scenario import load_scenario
        sc = load_scenario(r['testbed'])
        shape = {k: r[k] for k in ('m', 'n', 'k', 'e', 'topk', 'seq', 'heads') if k in r and r[k] is not None and hasattr(sc.workload, k)}
        sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel=r['kernel'], **shape))
    except Exception as e:
        print('skip', r['key'], e); continue
    module, w, c = builders.get(w_k := sc.workload.kernel), sc.workload, sc.cluster
    try:
        scheds = [module.build_baseline(w, c, library_tasks=False)]
        if hasattr(module, 'build_paper_baseline'):
            scheds.append(module.build_paper_baseline(w, c, grouped=True, library_tasks=False))
    except Exception as e:
        skipped.append((r['key'], type(e).__name__)); continue
    for s in scheds:
        cv = c.for_variant(s.variant)
        for l in s.launches:
            lib = l.library
            if lib is None or lib.kind == 'gemm':
                continue
            f = nccl.fabric_of(cv)
            ck = (lib.kind, lib.nbytes, f)
            if ck in seen:
                continue
            after = nccl.estimate(lib.kind, lib.nbytes, f)
            nccl_tuner.call_channels = lambda a, p, b, f, nch: nch
            before = nccl.estimate(lib.kind, lib.nbytes, f)
            nccl_tuner.call_channels = real
            seen[ck] = (before.time_us, after.time_us)
            print(r['key'], lib.kind, lib.nbytes, f.world, after.algo, after.proto, round(before.time_us, 1), round(after.time_us, 1), flush=True)
            if abs(after.time_us - before.time_us) > 1e-9:
                moved.append((r['key'], lib.kind, lib.nbytes, f.world, after.algo, after.proto, before.time_us, after.time_us))
print(len(skipped), 'rows skipped', sorted({k.split('/')[2] for k, _ in skipped}));print(len(seen), 'distinct calls;', len(moved), 'moved;', round(time.time() - t0, 1), 's')
