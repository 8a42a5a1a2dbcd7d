"""Every network mode, run small: each op's small workload (tests/harness/cases.py) on 2 x 2 GPUs under each
transport and notify mode, proxy settings that make the ring fill, the outstanding cap and fences wait, a slow
poll, and each fault; timing runs (grouped, every node, hazards tracked), data runs (flat) and traced runs.
Prints one line per case: its fused and baseline times, per-rank finishes, bytes, metrics, hazards, spans and
outputs (hashed), and the events. Run on two codes and diff the outputs (events may differ).
usage: modes.py OUT.txt"""
import dataclasses, hashlib, sys
sys.path.insert(0, "tests")
from harness.cases import SHAPES, small_workload
from mkernel import Cluster, NicSpec, Scenario, run
from mkernel.cluster import ProxySpec
from mkernel.sim.faults import Faults

PROXIES = {
    "default": ProxySpec(),
    "tight": ProxySpec(queue_depth=2, max_outstanding=1, batch=2),  # credits, the outstanding cap
    "nowindow": ProxySpec(batch_window_us=0.0, poll_us=0.0, batch=1),
    "slowpoll": ProxySpec(poll_us=1.0, batch_window_us=3.0, per_command_us=0.7),
}
NETS = [("ib_rc", "auto"), ("ib_rc", "imm"), ("ib_rc", "fence"), ("efa_srd", "auto"), ("efa_srd", "flag"),
        ("efa_srd", "fence"), ("ibgda", "auto")]
FAULTS = {
    "none": None,
    "delay": Faults(seed=1, delay_us=5.0),
    "reorder": Faults(seed=2, reorder=0.5, reorder_us=15.0),
    "duplicate": Faults(seed=3, duplicate=0.7, reorder_us=4.0),
    "stall": Faults(stall_rank=0, stall_at_us=0.0, stall_us=40.0),
    "nicdown": Faults(nic_down=(2, 0)),
    "drop": Faults(seed=6, drop=0.3, retransmit_us=20.0),
}


def digest(x) -> str:
    return hashlib.sha256(repr(x).encode()).hexdigest()[:16]


def case(kernel, transport, notify, proxy, fault, mode):
    nics = 2 if fault == "nicdown" else 1
    c = Cluster("m", 2, 2, transport=transport, notify=notify, nic=NicSpec(count=nics, srd_jitter_us=1.5),
                proxy=PROXIES[proxy])
    sc = Scenario("m", c, small_workload(kernel))
    try:
        result, stats = run(sc, data=mode == "data", seed=5, faults=FAULTS[fault], trace=mode == "trace",
                            collapse=False)
    except Exception as e:  # a fatal fault: its error is the result
        return f"error {type(e).__name__}: {e}"
    outs = {k: [a.tobytes() for a in v] for k, v in (stats.outputs or {}).items()}
    keep = {k: result.get(k) for k in ("time_s", "correct", "error")}
    keep["baseline"] = result.get("baseline", {}).get("time_s")
    return (f"{keep} per_rank={digest(stats.per_rank_s)} bytes={digest(stats.bytes_total)} "
            f"metrics={digest({k: v for k, v in stats.metrics.items()})} hazards={digest(result.get('hazards'))} "
            f"spans={digest(stats.spans)} outputs={digest(outs)} events={stats.events}")


lines = []
for kernel in sorted(SHAPES):
    for transport, notify in NETS:
        for proxy in PROXIES:
            for fault in FAULTS:
                modes = ("timing", "data", "trace") if (proxy == "default" or fault == "none") else ("timing",)
                for mode in modes:
                    lines.append(f"{kernel} {transport} {notify} {proxy} {fault} {mode}: "
                                 + case(kernel, transport, notify, proxy, fault, mode))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print(len(lines), "cases")
