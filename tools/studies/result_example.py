"""Rewrite the example of docs/result-schema.md from a fresh run of the default scenario.

    python tools/studies/result_example.py          # about 20 s on 2 cores

tests/test_readme.py runs the same scenario and fails when the example no longer matches.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import mkernel
from mkernel.result import abridged

DOC = Path(__file__).resolve().parents[2] / "docs" / "result-schema.md"
EXAMPLE = re.compile(r"(Example \(abridged\) from `mkernel run --json r.json`:\n\n```json\n)(.*?)(\n```)", re.S)


def example() -> str:
    result, _ = mkernel.run(mkernel.load_scenario())
    return json.dumps(abridged(result))


if __name__ == "__main__":
    text = DOC.read_text()
    if not EXAMPLE.search(text):
        raise SystemExit(f"{DOC}: no example block to rewrite")
    DOC.write_text(EXAMPLE.sub(lambda m: m.group(1) + example() + m.group(3), text))
    print(f"rewrote the example in {DOC}")
