"""The other split: EFA terms fitted on p5-ar-2n + p5-ar-scale + p5-a2a-scale, judged on p5-ag-scale."""
import dataclasses, sys
from mkernel import nccl
from mkernel.studies import nccl_check as nc
curves = nc.load()
flip = {"p5-ar-scale": True, "p5-ag-scale": False}
curves = [dataclasses.replace(c, fit=flip.get(c.id, c.fit)) for c in curves]
t = nc.fit("efa", curves)
print(t)
rows = {r["curve"]: r for r in nc.summary(curves, {"efa": t})}
for c in ("p5-ag-scale", "p5-ar-scale", "p5-ar-2n", "p5-a2a-scale"):
    print(c, f"{rows[c]['mean_abs_error']:.1%} / {rows[c]['worst'].error:+.1%}", "fit" if rows[c]["fit"] else "held out")
s = nc.split(curves, {"efa": t}); print(s)
