"""Frozen builds: a hash of the whole of every schedule the builders make, groups and all, on small
clusters, as main 80ff7c8 built them (issue 30: a faster build must build the same schedule).

The golden schedules (:mod:`harness.golden_schedules`) hash expanded builds, so they cannot tell
a group of 8 from two groups of 4; this hashes ``repr(schedule)``: every field of every task as
built (``count``, ``step``, the order of the tasks, the schedule's own fields). Each case builds its
fused and baseline schedules in every form a run asks for: flat and grouped; whole, folded to the
first nodes (where node-symmetric) and to local rank 0 (where rotation-symmetric); and the
baseline's timing build. ``tests/core/test_frozen_builds.py`` checks today's builders against the
table, on a slice of the cases (:data:`SLICE`); ``python tests/harness/frozen_builds.py --check`` checks
every case (about 15 s). Regenerate only for a deliberate change of a schedule: ``--write``; ``--big``
checks the hash of the every-node row's build (2 x 8, 32768^2: about 10 s), as built and expanded.

A deliberate regrouping (the same members in other groups) changes those hashes but must not change
what the groups stand for: :data:`EXPANDED_FILE` holds, per case, the hash of every form *expanded*
(:func:`mkernel.ir.expand`), as main b35c019 built them (before the GEMM+AR full builds' tile rows
became one group each: rotation inside a period), written with ``--write-expanded`` run on that
commit's code (``PYTHONPATH`` set to a checkout of it). ``--check`` checks both tables.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkernel.cluster import Cluster
    from mkernel.problems import Workload

try:
    from harness import golden_schedules as golden
except ImportError:  # run as a script
    import golden_schedules as golden

FILE = Path(__file__).parent.parent / "data" / "frozen_builds.json"
EXPANDED_FILE = Path(__file__).parent.parent / "data" / "frozen_expanded.json"  # (main b35c019's expansions)
GEMM_AR_SHAPES = {  # beside the goldens' ragged one: whole rows of owner cycles (groups of several
    # cycles, wrapped slots, whole groups of chunks), and a share too small for one group (twoshot's pieces)
    "even": dict(m=1024, n=2048, k=64, chunk_tiles=2),
    "shared": dict(m=256, n=1024, k=64, chunk_tiles=4),
}
GEMM_AR_CLUSTERS = [(1, 4), (2, 2), (2, 4), (3, 2), (4, 2), (2, 8)]
GEMM_AR_VARIANTS = [dict(internode=a, node_reduce=r) for a in ("direct", "twoshot", "ring") for r in ("pull", "push")]
BIG = dict(m=32768, n=32768, k=2048)  # the every-node row of issue 30 on paper-ib-2x8
BIG_SHA256 = "ba011b0afc8aebd41a61754ed7e0e0421cdfb781752384a4f5e83ab6a88cb84b"  # its tile rows as groups
# (main 80ff7c8 .. b35c019 built 5dec0b84...: one group per owner cycle); expanded, main b35c019's:
BIG_EXPANDED_SHA256 = "17e6837d8a93cac10454823b5d3a33e648e3a59bbd10db15fb2fe94ebae8deb6"
SLICE = ("/2x4/", "/even/4x2/", "/shared/4x2/")  # the suite's cases: GEMM+AR's on these, the other ops' on 2 x 4


def cases():
    """(name, workload, cluster) of every case: the goldens' (every op and variant), then GEMM+AR's
    variants (internode algorithm, node reduction) on more shapes."""
    from mkernel.scenario import load_scenario

    for name, w, c, first in golden.cases():
        if not first:  # (the goldens list a node-symmetric case twice: whole and folded)
            yield name, w, c
    sc = load_scenario("paper-ib-2x8")
    for shape, dims in GEMM_AR_SHAPES.items():
        for nodes, gpus in GEMM_AR_CLUSTERS:
            c = dataclasses.replace(sc.cluster, nodes=nodes, gpus_per_node=gpus)
            for options in GEMM_AR_VARIANTS:
                w = dataclasses.replace(sc.workload, kernel="gemm_ar", **dims, **options)
                yield f"gemm_ar/{shape}/{nodes}x{gpus}/{','.join(f'{k}={v}' for k, v in options.items())}", w, c


def builds(w, c):
    """(form, schedule) of every form of the case's fused and baseline builds (module docstring)."""
    from mkernel import builders

    module = builders.get(w.kernel)
    folds = [0] + ([c.fold_nodes] if builders.node_symmetric(w, c) and 0 < c.fold_nodes < c.nodes else [])
    for grouped in (False, True):
        for first in folds:
            kw = dict(grouped=grouped, **({"first_nodes": first} if first else {}))
            tag = f"{'grouped' if grouped else 'flat'}{f'/first{first}' if first else ''}"
            yield f"{tag}/fused", module.build(w, c, **kw)
            yield f"{tag}/baseline", module.build_baseline(w, c, **kw)
            yield f"{tag}/timing", module.build_baseline(w, c, library_tasks=False, **kw)
            if first and builders.local_symmetric(w, c):
                yield f"{tag}/local/fused", module.build(w, c, local_fold=True, **kw)
                if builders.local_baseline(w, c):
                    yield f"{tag}/local/timing", module.build_baseline(w, c, library_tasks=False, local_fold=True,
                                                                      **kw)


def digest(s) -> str:
    """The hash of everything the schedule holds (every dataclass of the IR has a repr of its fields)."""
    return hashlib.sha256(repr(s).encode()).hexdigest()


def case_digest(w, c) -> str:
    """One hash of every form of a case (a short one: it tells a change, not which form changed)."""
    forms = "".join(f"{form} {digest(s)}\n" for form, s in builds(w, c))
    return hashlib.sha256(forms.encode()).hexdigest()[:24]


def expanded_digest(w: Workload, c: Cluster) -> str:
    """:func:`case_digest` of every form expanded (a flat form is its own expansion)."""
    from mkernel.ir import expand

    forms = "".join(f"{form} {digest(expand(s))}\n" for form, s in builds(w, c))
    return hashlib.sha256(forms.encode()).hexdigest()[:24]


def in_slice(name: str) -> bool:
    return any(part in name for part in SLICE) and (name.startswith("gemm_ar/") or "/2x4/" in name)


def table() -> dict[str, str]:
    return {name: case_digest(w, c) for name, w, c in cases()}


def check(names=None) -> list[str]:
    """The cases (all, or those ``names`` admits) whose builds, or their expansions, no longer hash as frozen."""
    want, expanded = json.loads(FILE.read_text()), json.loads(EXPANDED_FILE.read_text())
    return [name for name, w, c in cases() if (names is None or names(name)) and (
        case_digest(w, c) != want[name] or expanded_digest(w, c) != expanded[name])]


def big() -> tuple[str, str]:
    """The hashes of the every-node row's grouped fused build, as built and expanded."""
    from mkernel.builders import gemm_ar
    from mkernel.ir import expand
    from mkernel.scenario import load_scenario

    sc = load_scenario("paper-ib-2x8")
    s = gemm_ar.build(dataclasses.replace(sc.workload, **BIG), sc.cluster, grouped=True)
    return digest(s), digest(expand(s))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        FILE.write_text(json.dumps(table(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {FILE}")
    elif sys.argv[1:] == ["--write-expanded"]:
        EXPANDED_FILE.write_text(json.dumps({name: expanded_digest(w, c) for name, w, c in cases()}, indent=1,
                                            sort_keys=True) + "\n")
        print(f"wrote {EXPANDED_FILE}")
    elif sys.argv[1:] == ["--check"]:
        bad = check()
        print(f"{len(bad)} cases differ" + "".join(f"\n  {name}" for name in bad))
        sys.exit(1 if bad else 0)
    elif sys.argv[1:] == ["--big"]:
        got = big()
        same = got == (BIG_SHA256, BIG_EXPANDED_SHA256)
        print(*got, "as frozen" if same else f"DIFFER from the frozen {BIG_SHA256}, {BIG_EXPANDED_SHA256} (expanded)")
        sys.exit(0 if same else 1)
    else:
        sys.exit("usage: python tests/harness/frozen_builds.py --write | --write-expanded | --check | --big")
