"""Hardware profiles: the simulator's parameters fitted from `mkernel calibrate`'s microbenchmarks.

A profile is a TOML file in ``scenarios/hardware/``. Its ``[gpu]``, ``[nvlink]``, ``[nic]`` and
``[proxy]`` tables use the scenario keys of :mod:`mkernel.scenario`; a scenario names it with
``[cluster] hardware = "h200"`` and its own keys override the profile's. Every parameter has a
``[provenance."table.key"]`` entry: how it was obtained (``measured``, ``datasheet`` or
``estimate``), by which microbenchmark, and for measured ones the date, GPU, driver, torch version,
commit and command of the run. ``[extra]`` holds measured figures the model does not use (host copy
rates), kept so that the profile is the whole record of the run.

Fitting is pure Python over the raw measurements (a dict that :mod:`mkernel.hw.measure.calibrate` produces
on a GPU), so it is tested without one. What each parameter is fitted from:

- ``gpu.matmul_tflops``: torch.matmul (cuBLAS) bf16 on all SMs, the largest square shape;
- ``gpu.fused_gemm_efficiency``: the fused kernel's GEMM (``gemm_ar`` at world 1: its compute role
  alone, the tiles every fused GEMM op runs, its per-call and per-tile costs included, which
  ``mkernel accuracy --fit-overheads`` then fits against) on the same shape / cuBLAS;
- ``gpu.full_tile_elems``: the fused kernel's per-SM rate with 128x128 workload tiles against
  128x256 ones, inverted through the sim's efficiency curve eff = sqrt(elems / full);
- ``gpu.sm_matmul_tflops``: the fused kernel's GEMM rate per SM on at most half the SMs (power and
  shared HBM/L2 hold the all-SM rate below SMs x this);
- ``gpu.hbm_gb_per_s``: the faster of a large device-to-device copy (torch) and the copy kernel on
  every SM, bytes read + written;
- ``gpu.sm_stream_gb_per_s``: a copy kernel on 1-8 blocks, the median rate per block;
- ``gpu.attention_efficiency``: flash SDPA TFLOPS / ``matmul_tflops``; ``fused_attention_efficiency``:
  our fused attention at world 1 / flash SDPA; ``reference_attention_efficiency``: torch's default SDPA
  dispatch (what a user gets, cuDNN on the H200) / ``matmul_tflops``, the attention rate of the
  ``reference`` kernel profile (the profile of a scenario's ``[cluster] kernels``: ``measured`` runs
  the fused kernel at the efficiencies above, ``reference`` every compute role at library speed);
- ``proxy.per_command_us`` and ``proxy.doorbell_us``: a least-squares fit of the loopback SIGNAL
  path's time per command against 1 / batch size (one driver call per batch);
- ``gpu.fused_call_us``, ``gpu.fused_tile_us``: not from calibrate but from a world-1 ``mkernel bench``
  (``mkernel accuracy --fit-overheads``, :func:`mkernel.studies.accuracy.fit_overheads`): the fused kernel's
  fixed cost per call and per compute tile, by least squares on its short-K GEMM ops;
- ``gpu.fused_peer_task_us``, ``fused_peer_step_us``, ``fused_local_step_us``, ``fused_sm_copy_gb_per_s``:
  from a splits run on real NVLink (``tools/studies/hw_splits.py``; ``mkernel accuracy --fit-overheads
  --splits``, :func:`mkernel.studies.accuracy.fit_peer_costs`): the fused kernel's fixed cost per
  communication task that touches a peer, the load round trip each of its copy steps waits, and
  one SM's rate while those loads stream;
- ``nvlink.*`` (two or more GPUs, :mod:`mkernel.hw.measure.peer`): ``bw_gb_per_s`` the most one GPU's SMs
  store into the peer, ``sm_copy_gb_per_s`` the median per block on 1-8 blocks,
  ``half_efficiency_bytes`` cost x rate of a line fit of one block's flagged messages against their
  size, ``latency_us`` half a flag ping-pong's round trip;
- ``proxy.gpu_enqueue_us``: the device's time per ring push; ``proxy.poll_us``: half the proxy-only
  round trip less the per-command cost (the native proxy spins, so this is how long a write to
  host-mapped memory takes to be seen, each way);
- ``nic.*``: the loopback transport, i.e. the emulated cluster's "network": bandwidth from large
  PUTs, per-message cost from 64-byte PUTs, latency from the PUT round trip less the proxy-only one.
"""
from __future__ import annotations

import statistics
import tomllib
from pathlib import Path

# Where the parameters a single H200 cannot measure come from.
UNMEASURED = {
    "nvlink.bw_gb_per_s": ("datasheet", "H200 NVLink 4: 450 GB/s per GPU per direction; measured with >= 2 GPUs"),
    "nvlink.latency_us": ("estimate", "peer store visible at the peer; measured with >= 2 GPUs"),
    "nvlink.sm_copy_gb_per_s": ("estimate", "one SM's peer copy rate; measured with >= 2 GPUs"),
    "nvlink.half_efficiency_bytes": ("estimate", "message size at half the link rate; measured with >= 2 GPUs"),
    "gpu.l2_operand_miss": ("estimate", "share of GEMM operand reads that reach HBM; not separable from "
                                        "the per-SM rate on one GPU"),
    "proxy.batch": ("design", "the native proxy's batch limit per connection (hw/runtime/csrc/proxy.c)"),
    "proxy.batch_window_us": ("design", "the proxy's polling window for a partial batch"),
    "proxy.queue_depth": ("design", "ring entries: the credits a GPU holds"),
    "proxy.max_outstanding": ("estimate", "RDMA writes in flight per proxy; needs a verbs device"),
}


def fit(raw: dict) -> dict:
    """The profile (a TOML-shaped dict) of one calibration run's raw measurements."""
    meta = raw["meta"]
    tables: dict[str, dict] = {"gpu": {}, "nvlink": {}, "nic": {}, "proxy": {}}
    provenance: dict[str, dict] = {}

    def put(key: str, value: float, bench: str, digits: int = 4) -> None:
        table, name = key.split(".")
        tables[table][name] = round(float(value), digits) if isinstance(value, float) else value
        provenance[key] = {"how": "measured", "bench": bench, **{k: meta[k] for k in
                                                                ("date", "gpu", "driver", "torch", "commit", "command")}}

    if "matmul" in raw:
        mm = raw["matmul"]
        put("gpu.name", meta["gpu_short"], "torch.cuda.get_device_name")
        put("gpu.sms", int(meta["sms"]), "multi_processor_count")
        put("gpu.matmul_tflops", mm["cublas_tflops"], f"torch.matmul bf16 {mm['shape']}, all SMs, CUDA-graph median")
        put("gpu.fused_gemm_efficiency", mm["ours_tflops"] / mm["cublas_tflops"],
            f"{_ours(mm)} / cuBLAS, bf16 {mm['shape']}, all SMs")
        eff = tile_rate_ratio(raw["gemm_sms"])
        if eff is not None:
            full = 128 * 128 / min(1.0, eff) ** 2
            put("gpu.full_tile_elems", int(min(max(full, 128 * 128), 4 * 128 * 256)),
                f"per-SM rate of 128x128 / 128x256 tiles = {eff:.3f}, through eff = sqrt(elems / full)")
        few = [r for r in raw["gemm_sms"] if r["bn"] == 256 and r["sms"] <= meta["sms"] // 2]
        if few:
            per_sm = [2.0 * r["bm"] * r["bn"] * r["k"] / (r["us"] / r["waves"]) / 1e6 for r in few]
            put("gpu.sm_matmul_tflops", statistics.median(per_sm),
                f"{_ours(few[0])}, 128x256 tiles on {', '.join(str(r['sms']) for r in few)} SMs: median TFLOPS per "
                f"SM (tile flops / (time / waves))")
        every_sm = max((r["gb_per_s"] for r in raw["stream"]), default=0.0)
        put("gpu.hbm_gb_per_s", max(raw["hbm"]["gb_per_s"], every_sm),
            f"max of torch device-to-device copy of {raw['hbm']['bytes'] >> 20} MiB "
            f"({raw['hbm']['gb_per_s']:.0f} GB/s) and the copy kernel on every SM ({every_sm:.0f} GB/s)")
        per_block = [r["gb_per_s"] / r["programs"] for r in raw["stream"] if r["programs"] <= 8]
        put("gpu.sm_stream_gb_per_s", statistics.median(per_block), "16-byte vector copy kernel on 1-8 blocks, "
                                                                    "median GB/s per block")
        at = raw["attention"]
        put("gpu.attention_efficiency", at["sdpa_tflops"] / mm["cublas_tflops"], f"flash SDPA {at['shape']} / matmul")
        if at.get("sdpa_default_tflops"):  # the reference kernel profile's attention (mkernel.cluster)
            put("gpu.reference_attention_efficiency", at["sdpa_default_tflops"] / mm["cublas_tflops"],
                f"SDPA default dispatch {at['shape']} / matmul")
        if at.get("fused_tflops"):
            put("gpu.fused_attention_efficiency", at["fused_tflops"] / at["sdpa_tflops"],
                f"mkernel fused attention at world 1 / flash SDPA, {at['shape']}")
    if "proxy" in raw:
        pr = raw["proxy"]
        per_command, doorbell = batch_fit([(r["batch"], 1e6 / r["cmds_per_s"]) for r in pr["batches"]])
        bench = "loopback SIGNAL throughput at batch " + ",".join(str(r["batch"]) for r in pr["batches"])
        put("proxy.per_command_us", per_command, bench + ": us per command = per_command + doorbell / batch")
        put("proxy.doorbell_us", doorbell, bench + ": us per command = per_command + doorbell / batch")
        put("proxy.gpu_enqueue_us", pr["push_us"], "device time per ring push (one producer block, 256 commands)")
        put("proxy.poll_us", max(0.0, (pr["roundtrip_proxy_us"] - per_command) / 2),
            "(proxy-only round trip p50 - per-command cost) / 2")
        lb = raw["loopback"]
        put("nic.count", 1, "the loopback transport: one copy stream per rank")
        put("nic.gbit_per_s", lb["gb_per_s"] * 8, f"loopback PUTs of {lb['put_bytes'] >> 10} KiB, throughput")
        put("nic.per_message_us", 1e6 / lb["small_cmds_per_s"], "loopback 64-byte PUT throughput, us per message")
        put("nic.latency_us", max(0.0, lb["roundtrip_put_us"] - pr["roundtrip_proxy_us"]),
            "loopback 64-byte PUT round trip p50 - proxy-only round trip p50")
    if "peer" in raw:
        _fit_peer(raw["peer"], put)

    for key, (how, why) in UNMEASURED.items():
        provenance.setdefault(key, {"how": how, "bench": why})
    return {"name": meta.get("name", "h200"),
            "description": f"Fitted by `{meta['command']}` on {meta['gpu']} ({meta['date']}, commit {meta['commit']}).",
            **{k: v for k, v in tables.items() if v}, "extra": raw.get("extra", {}), "provenance": provenance}


def _fit_peer(peer: dict, put) -> None:
    """The NVLink terms from :mod:`mkernel.hw.measure.peer`'s measurements between two GPUs."""
    copy = peer["copy"]
    best = max(copy, key=lambda r: r["gb_per_s"])
    put("nvlink.bw_gb_per_s", best["gb_per_s"], f"SM stores into the peer GPU, 256 MiB, most GB/s over 1-132 blocks "
                                                f"({best['programs']} blocks)")
    per_block = [r["gb_per_s"] / r["programs"] for r in copy if r["programs"] <= 8]
    put("nvlink.sm_copy_gb_per_s", statistics.median(per_block), "SM stores into the peer GPU on 1-8 blocks, median "
                                                                 "GB/s per block")
    msgs = [(r["bytes"], r["us_per_message"]) for r in peer["messages"]]
    cost_us, us_per_byte = line_fit(msgs)
    put("nvlink.half_efficiency_bytes", cost_us / us_per_byte if us_per_byte > 0 else 0.0,
        "one block's flagged messages of " + ",".join(f"{b >> 10}K" for b, _ in msgs)
        + " bytes: us = cost + bytes / rate, half efficiency at cost x rate", digits=0)
    put("nvlink.latency_us", peer["pingpong"]["one_way_us"], f"flag ping-pong between two GPUs, "
                                                             f"{peer['pingpong']['iters']} rounds: half the round trip")


def line_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares of y = a + b x over (x, y) points; both clamped at >= 0."""
    xs, ys = [float(x) for x, _ in points], [float(y) for _, y in points]
    if len(set(xs)) < 2:
        return max(0.0, ys[0]), 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs))
    return max(0.0, my - slope * mx), slope


def _ours(row: dict) -> str:
    """Which GEMM a calibration timed as "ours": the fused kernel's since 2026-12-04 (``kernel`` =
    ``fused``); the raw files of earlier runs timed the standalone persistent GEMM (hw/kernels/gemm.py)."""
    if row.get("kernel") == "fused":
        return "the fused kernel's GEMM (gemm_ar at world 1)"
    return "mkernel's standalone persistent GEMM (hw/kernels/gemm.py, before the fused kernel's was timed)"


def tile_rate_ratio(rows: list[dict]) -> float | None:
    """Per-SM throughput of 128x128 tiles over 128x256 tiles, at the largest SM count measured with both."""
    def rate(r: dict) -> float:  # flops per SM-microsecond, counting only the SMs the waves keep busy
        return 2.0 * r["m"] * r["n"] * r["k"] / (r["us"] * r["sms"])

    both = {r["sms"] for r in rows if r["bn"] == 128} & {r["sms"] for r in rows if r["bn"] == 256}
    if not both:
        return None
    sms = max(both)
    pick = {r["bn"]: r for r in rows if r["sms"] == sms and r["bn"] in (128, 256)}
    return rate(pick[128]) / rate(pick[256])


def batch_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of y = a + b / batch over (batch, y) points; both clamped at >= 0."""
    return line_fit([(1.0 / b, y) for b, y in points])


def to_toml(doc: dict) -> str:
    """TOML for a profile: top-level scalars, then one table per dict (nested dicts as dotted tables)."""
    def scalar(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    def key(k: str) -> str:
        return k if k.replace("_", "").replace("-", "").isalnum() else scalar(k)

    lines = [f"{key(k)} = {scalar(v)}" for k, v in doc.items() if not isinstance(v, dict)]

    def table(prefix: str, t: dict) -> None:
        lines.extend(["", f"[{prefix}]"])
        lines.extend(f"{key(k)} = {scalar(v)}" for k, v in t.items() if not isinstance(v, dict))
        for k, v in t.items():
            if isinstance(v, dict):
                table(f"{prefix}.{key(k)}", v)

    for k, v in doc.items():
        if isinstance(v, dict):
            table(key(k), v)
    return "\n".join(lines) + "\n"


def write(raw: dict, path: Path, merge: bool = False) -> dict:
    """Fit ``raw`` and write the profile to ``path``; returns the profile. With ``merge``, the keys
    fitted (and their provenance) replace those of the profile already at ``path`` and the rest stay
    (`mkernel calibrate` merges): a one-GPU run keeps the NVLink terms measured on two, a partial run
    (``--only peer``) updates a full one, and the fitted interpreter costs survive a re-calibration."""
    doc = fit(raw)
    if merge and path.exists():
        old = tomllib.loads(path.read_text())
        for table, values in doc.items():
            if isinstance(values, dict) and table != "provenance":
                old.setdefault(table, {}).update(values)
        # A key this run did not measure keeps its record: a one-GPU run must not relabel NVLink terms
        # measured on two GPUs as datasheet figures.
        provenance = old.setdefault("provenance", {})
        for key, record in doc["provenance"].items():
            if record["how"] == "measured" or key not in provenance:
                provenance[key] = record
        meta = raw["meta"]
        said = old.get("description", "")  # (every earlier update stays named: each took some terms)
        old["description"] = f"{said} Updated by `{meta['command']}` ({meta['date']}, commit {meta['commit']})."
        doc = old
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_toml(doc))
    return doc
