"""Count the events of the every-node 2x8 GEMM+AR run (tracked) by what each one is: a plain call by its
function, a generator step by its innermost frame, a SimPy event by its class. usage: evkinds.py SIZE"""
import collections, dataclasses, sys
from heapq import heappop
from mkernel import builders, ir
from mkernel.scenario import load_scenario
from mkernel.sim import SimBackend, signals

size = int(sys.argv[1])
sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, kernel="gemm_ar", m=size, n=size, k=size // 16)
mk, c = builders.get("gemm_ar"), sc.cluster
with ir.paused_gc():
    s = mk.build(w, c, grouped=True)
kinds = collections.Counter()


def inner(gen):
    while getattr(gen, "gi_yieldfrom", None) is not None and hasattr(gen.gi_yieldfrom, "gi_code"):
        gen = gen.gi_yieldfrom
    return gen.gi_code.co_name


def run(self, until=None):
    queue = self._queue
    while queue:
        self.events += 1
        when, _, _, event = heappop(queue)
        self.now = self._now = when
        if event.__class__ is tuple:
            fn = event[0]
            name = fn.__name__
            if name == "_resume" and getattr(fn, "__self__", None) is self:
                gen = event[1][0]
                name = "gen:" + (inner(gen) if gen.gi_frame is not None or gen.gi_yieldfrom else gen.gi_code.co_name)
            kinds[name] += 1
            fn(event[1])
        else:
            cb = event.callbacks
            what = type(event).__name__
            if cb and len(cb) == 1 and hasattr(cb[0], "args") and cb[0].args:
                what += "->gen:" + inner(cb[0].args[0])
            kinds[what] += 1
            self._process(event)
    self.events += 1


signals.CountingEnvironment.run = run
st = SimBackend().run(s, c, collapse=False)
print(repr(st.time_s * 1e6), st.events)
for k, v in kinds.most_common():
    print(f"{v:8d} {k}")
