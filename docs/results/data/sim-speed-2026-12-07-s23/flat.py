"""Where the compiled core's instructions go, function by function: each function's own lines of the generated C
plus the C-API calls it makes (generic attribute reads, dict lookups, boxing, allocations), not the core's own
functions it calls (their costs are theirs). Then the totals of four C-API calls over the whole core.
usage: callgrind_annotate --auto=yes --show-percs=no CG.out build/mkernel/sim/__native_core.c > ANNOT.txt
       python flat.py ANNOT.txt [ROWS]   (the C as built with the profiled sources: setup.py build_ext --inplace)"""
import re, collections, sys
fn=None; own=collections.Counter(); capi=collections.Counter(); detail=collections.defaultdict(collections.Counter)
fpat = re.compile(r'CPyDef_(\w+)\(.*\{\s*$')
inside=False
for line in open(sys.argv[1], errors='replace'):
    if line.startswith('-- ') and 'annotated source:' in line:
        inside = '__native_core.c' in line; continue
    if not inside: continue
    m = fpat.search(line)
    if m and '=>' not in line and not line.strip().startswith(('cpy_r','if','return')): fn=m.group(1); continue
    if fn is None: continue
    mm = re.match(r'^\s*([\d,]+)\s+=> (.*?)\s*\(([\d,]+)x\)', line)
    if mm:
        tgt = mm.group(2)
        if '0x0' in tgt or re.search(r'CPyDef_|CPyPy_|Vectorcall|_Call|call\.c|_dealloc|Dealloc|DECREF|lru_cache|type_call|slot_tp', tgt): continue
        v = int(mm.group(1).replace(',','')); capi[fn] += v; detail[fn][tgt.split(':')[-1]] += v; continue
    mm = re.match(r'^\s*([\d,]+)\s', line)
    if mm: own[fn] += int(mm.group(1).replace(',',''))
tot = collections.Counter()
for f in set(own)|set(capi): tot[f] = own[f]+capi[f]
print("total flat", sum(tot.values())/1e6)
for f,v in tot.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 40):
    top = ", ".join(f"{k} {x/1e6:.0f}" for k, x in detail[f].most_common(3))
    print(f"{v/1e6:8.1f} M  own {own[f]/1e6:7.1f} capi {capi[f]/1e6:7.1f}  {f:42s} {top}")
tot = collections.Counter()
inside = False
for line in open(sys.argv[1], errors='replace'):
    if line.startswith('-- ') and 'annotated source:' in line:
        inside = '__native_core.c' in line; continue
    mm = re.match(r'^\s*([\d,]+)\s+=> (.*?)\s*\(([\d,]+)x\)', line) if inside else None
    if mm and mm.group(2).split(':')[-1] in ('PyObject_GetAttr', 'CPyDict_GetWithNone', 'CPyDict_GetItem', 'CPyTagged_StealAsObject'):
        t = mm.group(2).split(':')[-1]
        tot[t] += int(mm.group(1).replace(',', '')); tot[t + ' calls'] += int(mm.group(3).replace(',', ''))
for k in sorted(tot):
    print(f"{k:32s} {tot[k]:>15,}")
