"""every-node-phases' phases.py (docs/results/data/every-node-phases-2026-12-05/phases.py) with the probe knob set:
`python phases_knob.py off|on|every|every8|chunk [JSON]`. The script's text is run as is, but for the lines added after its
`gemm_ar` import that set `gemm_ar.ROW_GROUPS` (and, for every8, turn off the joining of
cycles; for chunk, set `gemm_ar.CHUNK_WAITS`)."""
import sys
from pathlib import Path

src = Path(__file__).parents[1] / "every-node-phases-2026-12-05" / "phases.py"
EVERY8 = "\ngemm_ar._cycles = lambda cut, g, rel: [(list(run), 0) for run in cut]"  # (cgphases.py's every8)
knob = {"off": "False", "on": "True", "every": "'every'", "every8": "'every'" + EVERY8,
        "chunk": "False\ngemm_ar.CHUNK_WAITS = True"}[sys.argv[1]]
sys.argv = [str(src)] + sys.argv[2:]
anchor = "from mkernel.builders import gemm_ar  # noqa: E402\n"
text = src.read_text()
assert anchor in text
code = text.replace(anchor, anchor + f"gemm_ar.ROW_GROUPS = {knob}\n")
exec(compile(code, str(src), "exec"), {"__name__": "__main__", "__file__": str(src)})
