from mkernel import nccl
from mkernel.studies import nccl_check as nc
rows=[]
for c in nc.load():
    if c.id not in ("p5-ag-scale","p5-ar-scale","p5-ar-2n"): continue
    for nodes, nb, bus in c.points:
        f = c.fabric(nodes); e = nccl.estimate(c.coll, nb, f)
        if e.algo != "ring": continue
        n = f.world; steps = 2*(n-1) if c.coll=="all_reduce" else n-1
        t_meas = nb/(bus*1e3)*nccl.bus_factor(c.coll,n)
        ch = nb/(n*16)
        rows.append((e.proto, ch/1024, c.id, nodes, nb>>20, t_meas/steps, e.time_us/steps))
for r in sorted(rows): print("%-6s c=%7.1fK %-12s n=%2d %5dMiB meas/step=%6.2f model/step=%6.2f err=%+.1f%%" % (*r, (r[5]/r[6]-1)*100))
