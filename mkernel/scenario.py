"""Scenario files: a cluster plus a workload, in TOML.

Layout (every table and key is optional unless marked *required*; defaults are the dataclass
defaults in :mod:`mkernel.cluster` and :mod:`mkernel.problems`)::

    name = "paper-ib-2x8"              # defaults to the file's stem
    description = "..."
    [cluster]          nodes*, gpus_per_node*, transport, notify, launch_us, kernels (measured: our
                       kernels' calibrated speed; reference: cuBLAS / SDPA speed, mkernel.cluster),
                       hardware (a profile from `mkernel calibrate`: a path, or a bundled name
                       in scenarios/hardware/; its tables are the defaults this file overrides)
    [cluster.gpu]      name, sms, matmul_tflops, sm_matmul_tflops, hbm_gb_per_s, attention_efficiency,
                       fused_gemm_efficiency, fused_attention_efficiency, sm_stream_gb_per_s,
                       l2_operand_miss, full_tile_elems, memory_gib
    [cluster.nvlink]   bw_gb_per_s, latency_us, sm_copy_gb_per_s, half_efficiency_bytes
    [cluster.nic]      count, gbit_per_s, latency_us, per_message_us, srd_jitter_us, ibgda_post_us
    [cluster.proxy]    gpu_enqueue_us, poll_us, per_command_us, doorbell_us, batch, batch_window_us,
                       queue_depth, max_outstanding
    [cluster.fabric]   nodes_per_leaf (omit for a non-blocking fabric), oversubscription (spine, between leaf groups)
    [workload]         kernel*, m, n, k, dtype, tile_m, tile_n, chunk_tiles, causal, internode,
                       baseline_channels, baseline_chunk_kib, collectives (nccl or ir), schedule, split,
                       node_reduce (gemm_rs, gemm_ar: pull or push)
    [workload.sms]     compute, intra, send, recv   (SMs per role; unset roles get defaults)

Every problem is reported as one :class:`ScenarioError` naming the file, the dotted key and what
is allowed: unknown keys, missing keys, wrong types, impossible values, and shapes the op cannot
split across the cluster.
"""
from __future__ import annotations

import dataclasses
import tomllib
import typing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .cluster import KERNEL_PROFILES, NOTIFY_MODES, TRANSPORTS, Cluster, FabricSpec, GpuSpec, NicSpec, NvlinkSpec, ProxySpec
from .errors import InputError, ScenarioError
from .ir import DTYPE_BYTES, Role
from .problems import (BASELINES, COLLECTIVE_MODELS, INTERNODE, KERNELS, NODE_REDUCE_KERNELS, NODE_REDUCES, ROUTINGS,
                       SCHEDULES, SPLITS, Workload)

DEFAULT_SCENARIO = "default"
CHOICES = {"transport": TRANSPORTS, "notify": NOTIFY_MODES, "dtype": tuple(DTYPE_BYTES), "kernel": KERNELS,
           "internode": INTERNODE, "routing": ROUTINGS, "baseline": BASELINES,
           "collectives": COLLECTIVE_MODELS, "kernels": KERNEL_PROFILES, "schedule": SCHEDULES, "split": SPLITS,
           "node_reduce": NODE_REDUCES}
SPECS = {"gpu": GpuSpec, "nvlink": NvlinkSpec, "nic": NicSpec, "proxy": ProxySpec, "fabric": FabricSpec}
SHAPE_KEYS = {"gemm_ar": ("m", "n", "k"), "gemm_rs": ("m", "n", "k"), "ag_gemm": ("m", "n", "k"),
              "ring_attention": ("m", "n", "k")}


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named cluster and workload, and the file it came from (None if built in code)."""

    name: str
    cluster: Cluster
    workload: Workload
    path: str | None = None
    description: str = ""


def bundled_scenarios() -> list[str]:
    """Names of the scenario files shipped with mkernel (``scaleout/...`` for the scale-out set)."""
    root = resources.files("mkernel.scenarios")
    names = [p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml")]
    names += [f"scaleout/{p.name[:-5]}" for p in (root / "scaleout").iterdir() if p.name.endswith(".toml")]
    return sorted(names)


def resolve(spec: str | None) -> Path:
    """A scenario argument as a path: an existing file, or the name of a bundled scenario."""
    spec = spec or DEFAULT_SCENARIO
    path = Path(spec)
    if path.is_file():
        return path
    bundled = resources.files("mkernel.scenarios") / f"{spec.removesuffix('.toml')}.toml"
    if bundled.is_file():
        return Path(str(bundled))
    top = [n for n in bundled_scenarios() if "/" not in n]
    raise InputError(f"scenario {spec!r} is neither a file nor a bundled scenario "
                     f"({', '.join(top)}, or scaleout/NAME: see `mkernel scaleout --list`)")


def load_scenario(spec: str | None = None) -> Scenario:
    """Read and check a scenario file (a path or a bundled name; None = the default scenario)."""
    path = resolve(spec)
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    return parse(raw, str(path))


def parse(raw: dict, where: str) -> Scenario:
    """Build a Scenario from a parsed TOML table; ``where`` names the source in errors."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: a scenario is a table of keys, got {type(raw).__name__}")
    _known(raw, {"name", "description", "cluster", "workload"}, "", where)
    cl = _table(raw, "cluster", where, required=True)
    profile = load_profile(cl["hardware"], where) if "hardware" in cl else {}
    specs = {}
    for key, cls in SPECS.items():
        own = _fields(cls, _table(cl, key, where, prefix="cluster."), f"cluster.{key}.", where)
        specs[key] = cls(**{**profile.get(key, {}), **own})
    top = {k: v for k, v in cl.items() if k not in specs and k != "hardware"}
    cluster_args = _fields(Cluster, top, "cluster.", where, skip={"name", *specs},
                           required={"nodes", "gpus_per_node"})
    name = _typed(raw.get("name", Path(where).stem), str, "name", where)
    cluster = Cluster(name=name, **cluster_args, **specs)

    wl = _table(raw, "workload", where, required=True)
    sms_raw = _table(wl, "sms", where, prefix="workload.")
    _known(sms_raw, {r.value for r in Role}, "workload.sms.", where)
    sms = tuple((Role(k), _count(v, f"workload.sms.{k}", where, minimum=0)) for k, v in sms_raw.items())
    wl_args = _fields(Workload, {k: v for k, v in wl.items() if k != "sms"}, "workload.", where,
                      skip={"sms", "routes"}, required={"kernel"})  # routes: the torch op only
    for key in SHAPE_KEYS.get(wl_args["kernel"], ()):
        if key not in wl_args:
            raise ScenarioError(f"{where}: missing key 'workload.{key}' (an integer >= 1)")
    workload = Workload(**wl_args, sms=sms)
    scenario = Scenario(name, cluster, workload, where, _typed(raw.get("description", ""), str, "description", where))
    check(scenario, where)
    return scenario


def load_profile(spec, where: str) -> dict[str, dict]:
    """A hardware profile's spec tables, checked: ``spec`` is a path (absolute, relative to the
    scenario file, or to the working directory) or a bundled name in scenarios/hardware/."""
    spec = _typed(spec, str, "cluster.hardware", where)
    here = Path(where).parent / spec
    bundled = resources.files("mkernel.scenarios") / "hardware" / f"{spec.removesuffix('.toml')}.toml"
    path = next((Path(str(p)) for p in (here, Path(spec), bundled) if p.is_file()), None)
    if path is None:
        names = sorted(p.name[:-5] for p in (resources.files("mkernel.scenarios") / "hardware").iterdir()
                       if p.name.endswith(".toml"))
        raise ScenarioError(f"{where}: key 'cluster.hardware' is {spec!r}: no such profile file or bundled "
                            f"profile ({', '.join(names)})")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    _known(raw, {"name", "description", "extra", "provenance", *SPECS}, "", str(path))
    return {key: _fields(cls, _table(raw, key, str(path)), f"{key}.", str(path)) for key, cls in SPECS.items()}


def check(scenario: Scenario, where: str) -> None:
    """Ask the op's builder whether it can split this shape over this cluster (and refuse a node
    reduction pushed on an op that has none)."""
    from . import builders

    w = scenario.workload
    if w.node_reduce != "pull" and w.kernel not in NODE_REDUCE_KERNELS:
        raise ScenarioError(f"{where}: node_reduce = {w.node_reduce!r} applies to {' and '.join(NODE_REDUCE_KERNELS)} "
                            f"only, not {w.kernel}")
    try:
        builders.get(scenario.workload.kernel).check(scenario.workload, scenario.cluster)
    except InputError as exc:
        raise ScenarioError(f"{where}: workload cannot run on this cluster: {exc}") from None


# -- the little schema language: dataclass fields are the allowed keys, annotations the types --
def _known(table: dict, allowed: set[str], prefix: str, where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ScenarioError(f"{where}: unknown key '{prefix}{key}'; allowed here: {', '.join(sorted(allowed))}")


def _table(parent: dict, key: str, where: str, prefix: str = "", required: bool = False) -> dict:
    if key not in parent:
        if required:
            raise ScenarioError(f"{where}: missing table [{prefix}{key}]")
        return {}
    if not isinstance(parent[key], dict):
        raise ScenarioError(f"{where}: key '{prefix}{key}' must be a table, got {type(parent[key]).__name__}")
    return parent[key]


def _fields(cls, table: dict, prefix: str, where: str, skip: set[str] = frozenset(),
            required: set[str] = frozenset()) -> dict:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)} - set(skip)
    _known(table, names, prefix, where)
    for key in required:
        if key not in table:
            raise ScenarioError(f"{where}: missing key '{prefix}{key}'")
    out = {}
    for key, value in table.items():
        full = prefix + key
        kind = hints[key]
        if kind is int:
            out[key] = _count(value, full, where)
        elif kind is float:
            out[key] = _number(value, full, where)
        else:
            out[key] = _typed(value, str, full, where)
            if key in CHOICES and value not in CHOICES[key]:
                raise ScenarioError(f"{where}: key '{full}' is {value!r}; allowed: {', '.join(CHOICES[key])}")
    return out


def _typed(value, kind: type, key: str, where: str):
    if not isinstance(value, kind):
        raise ScenarioError(f"{where}: key '{key}' must be a {kind.__name__}, got {type(value).__name__} {value!r}")
    return value


def _count(value, key: str, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{where}: key '{key}' must be an integer >= {minimum}, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ScenarioError(f"{where}: key '{key}' must be an integer >= {minimum}, got {value}")
    return value


def _number(value, key: str, where: str) -> float:
    """Latencies and costs (``*_us``) may be 0; rates and sizes must be positive."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(f"{where}: key '{key}' must be a number, got {type(value).__name__} {value!r}")
    zero_ok = key.endswith("_us")
    if value < 0 or (value == 0 and not zero_ok) or value != value or value in (float("inf"), float("-inf")):
        allowed = "a finite number >= 0" if zero_ok else "a finite number > 0"
        raise ScenarioError(f"{where}: key '{key}' must be {allowed}, got {value}")
    return float(value)
