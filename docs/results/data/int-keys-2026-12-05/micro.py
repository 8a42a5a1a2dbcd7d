import timeit
N = 850_000
name = "flag_x"
d = {}
keys = [(i % 16, name, i) for i in range(N)]
for k in keys: d[k] = [1, None]
ik = list(range(N)); cells = [[1, None] for _ in range(N)]
def build_t():
    return [(3 + i * 0, name, 5 + i * 1) for i in range(N)]
def build_i():
    return [7 + i * 3 for i in range(N)]
def look_t():
    get = d.get
    for k in keys:
        c = get(k)
        c[0] += 1
def look_i():
    for k in ik:
        c = cells[k]
        c[0] += 1
for f in (build_t, build_i, look_t, look_i):
    print(f.__name__, min(timeit.repeat(f, number=1, repeat=5)))
S = 40
di = {}
iks = [((i % 16) << S | (3 << 32)) + i + 2**31 for i in range(N)]
for k in iks: di[k] = [1, None]
def build_bi():
    base, st = (3 << S) | (5 << 32) | 2**31, (0 << S) + 1
    return [base + i * st for i in range(N)]
def look_di():
    get = di.get
    for k in iks:
        c = get(k)
        c[0] += 1
for f in (build_t, build_bi, look_t, look_di):
    print(f.__name__, min(timeit.repeat(f, number=1, repeat=5)))
