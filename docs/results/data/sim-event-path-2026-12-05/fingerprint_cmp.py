import sys, json, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
ok = True
for k in ("chk", "land", "nland"):
    same = np.array_equal(a[k], b[k], equal_nan=True)
    print(k, "same" if same else f"DIFFER at {np.flatnonzero(~((a[k]==b[k]) | (np.isnan(a[k]) & np.isnan(b[k]))))[:10]}")
    ok &= same
ma, mb = json.loads(str(a["meta"])), json.loads(str(b["meta"]))
for k in ma:
    if isinstance(ma[k], dict):
        for kk in ma[k]:
            if ma[k][kk] != mb[k][kk]:
                print("DIFF", k, kk, str(ma[k][kk])[:200], "|", str(mb[k][kk])[:200]); ok &= kk == "events"
    elif ma[k] != mb[k]:
        print("DIFF", k); ok = False
print("ALL SAME (events may differ)" if ok else "MISMATCH")
