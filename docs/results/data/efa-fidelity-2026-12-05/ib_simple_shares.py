"""ib-ag-4n (4 x 8 H100, IB, LL128 off: Simple from 4 MiB), the one published Simple ring across nodes
below 1 MiB a channel: measured against the model per size, with a channel's share and slice count.
Run from the repository root."""
from mkernel import nccl
from mkernel.studies import nccl_check as nc

c = next(c for c in nc.load() if c.id == "ib-ag-4n")
print("MiB | KiB a channel | slices a step | pick | measured GB/s | model GB/s | error")
for n, b, bw in c.points:
    f = c.fabric(n)
    e = nccl.estimate(c.coll, b, f)
    share = b / (f.world * nccl.channels(f))
    per = nccl._ring_slices(share, "Simple", f)[1] if e.proto == "Simple" else "-"
    print(f"{b / 2**20:.0f} | {share / 1024:.0f} | {per} | {e.algo}/{e.proto} | {bw:.1f} | {e.busbw_gb_per_s:.1f} | "
          f"{e.busbw_gb_per_s / bw - 1:+.1%}")
