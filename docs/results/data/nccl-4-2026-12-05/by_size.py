from mkernel.studies import nccl_check as nc
curves = nc.load()
bins = ((1 << 20, 4 << 20), (4 << 20, 64 << 20), (64 << 20, 512 << 20), (512 << 20, 1 << 60))
for c in curves:
    errs = nc.point_errors(c)
    if not errs: continue
    cells = []
    for lo, hi in bins:
        e = [abs(p.error) for p in errs if lo <= p.nbytes < hi]
        cells.append(f"{sum(e)/len(e):.1%} ({len(e)})" if e else "-")
    w = max(errs, key=lambda p: abs(p.error))
    print(c.id, f"{sum(abs(p.error) for p in errs)/len(errs):.1%}", f"{w.error:+.1%} ({w.nbytes>>20} MiB, {w.nodes} nodes)", *cells, sep=" | ")
