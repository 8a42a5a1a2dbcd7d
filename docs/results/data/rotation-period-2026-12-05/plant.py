"""Plant one error at a time (file, old, new), run the given tests, restore. usage: plant.py TESTS..."""
import subprocess, sys, pathlib
PLANTS = [
 ("mkernel/ir.py", "return i - p if i % p >= p - r else i", "return i - self.count if i % p >= p - r else i"),
 ("mkernel/ir.py", "if st.rotate and b >= st.period - st.rotate:", "if False:"),
 ("mkernel/signal_table.py", "b -= np.where(b >= p - rotate[entry[rec]], p, 0)", "b -= np.where(b >= count[entry[rec]] - rotate[entry[rec]], count[entry[rec]], 0)"),
 ("mkernel/signal_table.py", "        if b >= wrap:\n            b -= p\n        for rank, name", "        for rank, name"),
 ("sim/signals.py", "            if b >= wrap:\n                b -= p\n", ""),
 ("mkernel/members.py", "np.where(period > 0, period, counts[at])", "counts[at]"),
 ("mkernel/members.py", "return i - np.where((rotate > 0) & (i % np.maximum(cycle, 1) >= cycle - rotate), cycle, 0)", "return i - np.where((rotate > 0) & (i >= cycle - rotate), cycle, 0)"),
 ("mkernel/validate.py", "corners = sorted({i for i in (p - rot - 1, p - rot, last - rot, last - rot + 1) if 0 < i})", "corners = sorted({i for i in (p - 1, last // p * p - 1, last // p * p, last) if 0 < i})"),
 ("mkernel/validate.py", "not 0 < rot < cycle or task.count % cycle)", "not 0 < rot < cycle)"),
 ("mkernel/builders/_tiling.py", "& (index[1:] == index[:-1] + period))", ")"),
 ("mkernel/builders/_tiling.py", "& (first[1:] == first[:-1] + period)", ""),
 ("mkernel/builders/gemm_ar.py", "by_cycle = ((0, g),)", "by_cycle = ((0, g + 1),)"),
 ("mkernel/builders/gemm_ar.py", "cycles if cycles > 1 or sb.local_fold else 0", "0"),
 ("mkernel/schedule_builder.py", "if n > 1 and st.signals and st.rotate:", "if False:"),
 ("mkernel/screen.py", "for a in (0, count[at] // np.maximum(cyc, 1) - 1):", "for a in (0,):"),
 ("mkernel/screen.py", "(count[at[cycling]] % np.maximum(period[cycling], 1) == 0) & ", ""),
 ("mkernel/screen.py", " & moves\n", "\n"),
 ("mkernel/screen.py", "(rot[at] < cycle[at])", "(rot[at] < count[at])"),
 ("mkernel/screen.py", "for b in (-r, cyc - r - 1):", "for b in (0, cyc - r - 1):"),
]
import os
tests = sys.argv[1:]
only = os.environ.get("ONLY", "")
for path, old, new in PLANTS:
    if only not in path:
        continue
    p = pathlib.Path(path); src = p.read_text()
    assert src.count(old) == 1, (path, old)
    p.write_text(src.replace(old, new))
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests], capture_output=True, text=True)
        last = [l for l in r.stdout.splitlines() if l.strip()][-1]
        print(f"{'CAUGHT' if r.returncode else 'MISSED'}  {path}: {old[:60]!r} -> {new[:40]!r}\n        {last}")
    finally:
        p.write_text(src)
