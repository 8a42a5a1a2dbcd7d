"""Chrome/Perfetto trace files from the spans and counters a backend records.

One process per rank. Each (role, SM slot) and the host proxy is a thread track; each NVLink port
and NIC direction is a counter track of its rate in GB/s, and under the adaptive SM partition the
intra role's target is one more counter track (SMs). Every track is named with metadata
events, so Perfetto shows ``rank 3 / intra sm2`` or ``rank 3 / nic0.out GB/s``.
"""
from __future__ import annotations

import json
from pathlib import Path

ROLE_ORDER = {"compute": 0, "intra": 1, "send": 2, "recv": 3, "proxy": 4}


def chrome_trace(spans: list[tuple], counters: list[tuple] = ()) -> dict:
    """Spans ``(rank, track, slot, name, start_us, end_us)`` and counters ``(rank, track,
    [(time_us, value)])`` (rates in GB/s) or ``(rank, track, [(time_us, value)], unit)`` as a Chrome
    trace-event document."""
    events, tracks = [], {}
    for rank, role, slot, name, start, end in spans:
        tid = tracks.setdefault((rank, role, slot), ROLE_ORDER.get(role, 9) * 10000 + slot)
        events.append({"name": name, "cat": role, "ph": "X", "pid": rank, "tid": tid, "ts": start,
                       "dur": max(end - start, 0.0)})
    for rank, track, samples, *unit in counters:
        unit = unit[0] if unit else "GB/s"
        for t, value in samples:
            events.append({"name": f"{track} {unit}", "ph": "C", "pid": rank, "ts": t, "args": {unit: value}})
    for rank in sorted({r for r, _, _ in tracks} | {c[0] for c in counters}):
        events.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}})
    for (rank, role, slot), tid in tracks.items():
        events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": f"{role} sm{slot}"}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_chrome_trace(spans: list[tuple], counters: list[tuple], path: str | Path) -> None:
    Path(path).write_text(json.dumps(chrome_trace(spans, counters)))
