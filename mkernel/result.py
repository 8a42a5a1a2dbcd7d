"""The result JSON that every backend's run produces (documented in docs/result-schema.md).

:func:`check_result` is the executable form of that document: tests run it on every backend's
output, and the CLI runs it before writing ``--json``.
"""
from __future__ import annotations

RESULT_VERSION = 2
SOURCES = ("predicted", "measured", "emulated")  # where a time comes from: the simulator, the GPUs, an emulation
_NUM = (int, float)
_OPT_NUM = (int, float, type(None))

# key -> allowed Python types of its value
TOP_LEVEL = {
    "version": (int,), "kernel": (str,), "variant": (str,), "backend": (str,), "scenario": (str,),
    "shape": (dict,), "dtype": (str,), "cluster": (dict,), "time_s": _NUM, "time_source": (str,),
    "tflops_per_gpu": _NUM, "baseline": (dict, type(None)), "speedup": _OPT_NUM, "predicted": (dict, type(None)),
    "bytes": (dict,), "bytes_per_gpu": (dict,),
    "roles": (dict,), "correct": (bool, type(None)), "error": _OPT_NUM, "hazards": (list,),
    "seed": (int,), "wall_s": _NUM, "events": (int, type(None)), "note": (str,),
    "breakdown": (dict, type(None)), "proxy": (dict, type(None)), "collapsed": (bool, type(None)),
    "sim_core": (str, type(None)),
    "paper_baseline": (dict, type(None)), "kernels": (str,), "collectives": (str,),
    "internode": (str, type(None)), "schedule": (str,),
}
BREAKDOWN = ("total", "compute", "exposed_communication", "proxy_queueing", "fence_wait")
CLUSTER = {"nodes": (int,), "gpus_per_node": (int,), "transport": (str,)}
BASELINE = {"name": (str,), "time_s": _NUM, "time_source": (str,), "tflops_per_gpu": _NUM,
            "correct": (bool, type(None)), "error": _OPT_NUM, "bytes": (dict,)}
PREDICTED = {"time_s": _NUM, "baseline_time_s": _NUM, "speedup": _NUM}
PAPER_BASELINE = {"name": (str,), "time_s": _NUM, "tflops_per_gpu": _NUM, "speedup": _NUM}
TIERS = ("nvlink", "network", "host")
ROLES = ("compute", "intra", "send", "recv")


def _check_keys(obj: dict, spec: dict, where: str) -> list[str]:
    problems = [f"{where}: missing key {k!r}" for k in spec if k not in obj]
    problems += [f"{where}: unexpected key {k!r}" for k in obj if k not in spec]
    problems += [f"{where}.{k}: {type(obj[k]).__name__} is not one of {[t.__name__ for t in spec[k]]}"
                 for k in spec if k in obj and (not isinstance(obj[k], spec[k])
                                                or (isinstance(obj[k], bool) and bool not in spec[k]))]
    return problems


def check_result(result: dict) -> list[str]:
    """Every way ``result`` departs from the schema; an empty list means it conforms."""
    problems = _check_keys({"sim_core": None, **result}, TOP_LEVEL, "result")  # (sim_core: absent from earlier files)
    if problems:
        return problems
    problems += _check_keys(result["cluster"], CLUSTER, "result.cluster")
    problems += _check_keys(result["bytes"], dict.fromkeys(TIERS, _NUM), "result.bytes")
    problems += _check_keys(result["bytes_per_gpu"], dict.fromkeys(TIERS, _NUM), "result.bytes_per_gpu")
    problems += _check_keys(result["roles"], dict.fromkeys(ROLES, (int,)), "result.roles")
    if result["baseline"] is not None:
        problems += _check_keys(result["baseline"], BASELINE, "result.baseline")
    if result["predicted"] is not None:
        problems += _check_keys(result["predicted"], PREDICTED, "result.predicted")
    if result["paper_baseline"] is not None:
        problems += _check_keys(result["paper_baseline"], PAPER_BASELINE, "result.paper_baseline")
    if result["breakdown"] is not None:
        problems += _check_keys(result["breakdown"], dict.fromkeys(BREAKDOWN, _NUM), "result.breakdown")
    if problems:
        return problems
    sources = [result["time_source"]] + ([result["baseline"]["time_source"]] if result["baseline"] else [])
    problems += [f"result: time source {s!r} is not one of {list(SOURCES)}" for s in sources if s not in SOURCES]
    comparable = len(sources) == 2 and sources[0] == sources[1] and sources[0] != "emulated"
    if (result["speedup"] is not None) != comparable:
        problems.append("result: speedup is given exactly when fused and baseline times have one source, "
                        "measured or predicted (never from an emulation)")
    if result["time_s"] <= 0:
        problems.append("result.time_s must be > 0")
    if result["correct"] is None and result["error"] is not None:
        problems.append("result: error is given only when the output was checked")
    return problems


def abridged(result: dict, digits: int = 4) -> dict:
    """``result`` with every float rounded to ``digits`` significant digits (docs/result-schema.md's
    example is this of the default scenario's run; tests/test_readme.py checks it stays so)."""
    def short(x):
        if isinstance(x, float):
            return float(f"{x:.{digits}g}")
        if isinstance(x, dict):
            return {k: short(v) for k, v in x.items()}
        if isinstance(x, list):
            return [short(v) for v in x]
        return x

    return short(result)
