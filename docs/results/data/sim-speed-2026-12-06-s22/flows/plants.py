"""Plant each bug in sim/flows.py or sim/maxmin.py (the Python core: -X mkernel-pure), run the tests meant to
catch it, restore the source. Prints each plant and whether its tests failed (CAUGHT) or passed (MISSED).
usage (from the worktree's root, PYTHONPATH on it): plants.py"""
import subprocess, sys
from pathlib import Path

T = "tests/sim/test_flows_reuse.py"
PLANTS = [  # (file, text, planted text, tests)
    ("sim/flows.py", "self.batch = 0, 0.0, 0.0, now, None, None", "self.batch = 0, self.vtime, 0.0, now, None, None",
     f"{T}::test_a_revived_group_runs_as_a_group_made_anew"),
    ("sim/flows.py", "self.batch = 0, 0.0, 0.0, now, None, None", "self.batch = 0, 0.0, self.rate, self.stamp, None, None",
     f"{T}::test_a_revived_group_runs_as_a_group_made_anew"),
    ("sim/flows.py", "        _BORN[0] = self.born = _BORN[0] + 1\n        return self", "        return self",
     f"{T}::test_a_revived_group_runs_as_a_group_made_anew"),
    ("sim/maxmin.py", "if link.reached == len(link.flows):", "if link.reached >= len(link.flows) - 1:",
     f"{T}::test_the_component_search_finds_what_reading_every_link_finds"),
    ("sim/maxmin.py", "            link.reached = 0\n", "",
     f"{T}::test_the_component_search_finds_what_reading_every_link_finds"),
    ("sim/maxmin.py", "tuple([r % n for r in ranked])", "tuple([r // n for r in ranked])",
     f"{T}::test_the_birth_order_of_a_state_is_the_sort_by_birth"),
    ("sim/maxmin.py", "ranked.sort()", "ranked.sort(reverse=True)",
     f"{T}::test_the_birth_order_of_a_state_is_the_sort_by_birth"),
    ("sim/maxmin.py", "if link.fill_tag is not tag and (left is None or link in left):", "if link.fill_tag is not tag:",
     "tests/sim/test_maxmin_exact.py"),
    ("sim/flows.py", "        self.touched.clear()\n        self.batch = object()\n", "        self.touched.clear()\n",
     "tests/sim/test_flows.py tests/sim/test_maxmin.py tests/sim/test_nvflow_paths.py"),
    ("sim/flows.py", "if rate == flow.rate and flow.batch is not batch:", "if rate == flow.rate:",
     "tests/sim/test_flows.py tests/sim/test_maxmin.py tests/sim/test_nvflow_paths.py"),
]
for file, text, planted, tests in PLANTS:
    path = Path(file)
    source = path.read_text()
    assert source.count(text) == 1, (file, text)
    try:
        path.write_text(source.replace(text, planted))
        done = subprocess.run([sys.executable, "-X", "mkernel-pure", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               *tests.split()], capture_output=True, text=True)
    finally:
        path.write_text(source)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
    print("CAUGHT" if done.returncode else "MISSED", f"{file}: {text.strip()!r} -> {planted.strip()!r}: {last}")
