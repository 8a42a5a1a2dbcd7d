"""Chrome/Perfetto trace files from the spans a backend records.

One process per rank, one thread per (role, SM slot); every track is named with metadata events,
so Perfetto shows ``rank 3 / intra sm2`` rather than bare numbers.
"""
from __future__ import annotations

import json
from pathlib import Path

ROLE_ORDER = {"compute": 0, "intra": 1, "send": 2, "recv": 3}


def chrome_trace(spans: list[tuple]) -> dict:
    """Spans ``(rank, role, slot, name, start_us, end_us)`` as a Chrome trace-event document."""
    events, tracks = [], {}
    for rank, role, slot, name, start, end in spans:
        tid = tracks.setdefault((rank, role, slot), ROLE_ORDER.get(role, 9) * 10000 + slot)
        events.append({"name": name, "cat": role, "ph": "X", "pid": rank, "tid": tid, "ts": start,
                       "dur": max(end - start, 0.0)})
    for rank in sorted({r for r, _, _ in tracks}):
        events.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"rank {rank}"}})
    for (rank, role, slot), tid in tracks.items():
        events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": f"{role} sm{slot}"}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_chrome_trace(spans: list[tuple], path: str | Path) -> None:
    Path(path).write_text(json.dumps(chrome_trace(spans)))
