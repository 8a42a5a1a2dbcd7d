import pickle, sys
a, b = (pickle.load(open(p, "rb")) for p in sys.argv[1:3])
assert a.keys() == b.keys(), set(a) ^ set(b)
bad = [k for k in a if a[k] != b[k]]
for k in bad[:20]:
    if isinstance(a[k], dict):
        print(k, [f for f in a[k] if a[k][f] != b[k][f]])
    else:
        print(k)
print(f"{len(a)} compared, {len(bad)} differ")
