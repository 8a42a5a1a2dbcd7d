"""How often the every-node row's tracked fused run re-rates its flows, and in how many distinct states
(everything maxmin.max_min reads of a whole component: plan keys and counts in the component's order, the
groups' birth order, the links' weights). usage: python resolves.py (from the checkout root, main's code)"""
import collections
import dataclasses

import mkernel.sim.flows as F
import mkernel.sim.maxmin as M
from mkernel import runner
from mkernel.scenario import load_scenario

states, solves = set(), collections.Counter()
resolve = M.Solves.resolve


def counted(self, links):
    flows, rates = resolve(self, links)
    keys = tuple(map(id, map(M._KEY, flows)))
    order = list(dict.fromkeys([link for flow in flows for link in flow.links]))
    states.add(self._state(flows, keys, order))
    solves["whole"] += 1
    return flows, rates


made = []
init = M.Solves.__init__


def kept(self, *args, **kw):
    init(self, *args, **kw)
    made.append(self)


M.Solves.resolve, M.Solves.__init__ = counted, kept
sc = load_scenario("scenarios/paper-ib-2x8.toml")
sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel="gemm_ar", m=32768, n=32768, k=2048))
runner.run(sc, collapse=False)
print(f"whole-component re-rates {solves['whole']} (fused and baseline runs), distinct states {len(states)}; "
      f"remembered by each network (solves, found): {[(s.solved, s.found) for s in made]}")
