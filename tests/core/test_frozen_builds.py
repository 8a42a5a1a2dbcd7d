"""The builders build the same schedules as before, field for field and group for group (issue 30:
the build phase made faster must not change what it builds). Every form of every op's builds on a
slice of small clusters (tests/harness/frozen_builds.py; its ``--check`` runs every case). A case
regrouped on purpose (GEMM+AR's tile rows, rotation inside a period) hashes anew, and its forms
expanded must still hash as main b35c019's expansions: the same members, task for task."""
from __future__ import annotations

import json

import pytest

from harness import frozen_builds as frozen

TABLE = json.loads(frozen.FILE.read_text())
EXPANDED = json.loads(frozen.EXPANDED_FILE.read_text())  # (main b35c019's)
CASES = [case for case in frozen.cases() if frozen.in_slice(case[0])]


@pytest.mark.parametrize("name,w,c", CASES, ids=[case[0] for case in CASES])
def test_every_form_of_the_builds_hashes_as_frozen(name, w, c):
    assert frozen.case_digest(w, c) == TABLE[name]


@pytest.mark.parametrize("name,w,c", CASES, ids=[case[0] for case in CASES])
def test_every_form_expands_as_main_b35c019_built_it(name, w, c):
    assert frozen.expanded_digest(w, c) == EXPANDED[name]


def test_the_table_covers_every_case_and_the_slice_every_gemm_ar_variant():
    names = [name for name, _, _ in frozen.cases()]
    assert sorted(names) == sorted(TABLE) == sorted(EXPANDED)
    sliced = {name.split("/")[-1] for name, _, _ in CASES if name.startswith("gemm_ar/even/")}
    assert len(sliced) == len(frozen.GEMM_AR_VARIANTS)
