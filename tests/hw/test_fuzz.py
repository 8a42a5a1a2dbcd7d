"""A seeded slice of the fuzzers (tools/studies/fuzz.py runs 10k+ examples per target): every input is
accepted or refused with an MkernelError; nothing else escapes."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.fuzz_targets import (command_target, proxy_garbage_target, ring_garbage, scenario_tables, scenario_target,
                          schedule_edits, schedule_target)

SLICE = settings(max_examples=150, derandomize=True, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SLICE
@given(scenario_tables())
def test_scenario_parser_accepts_or_refuses_cleanly(raw):
    scenario_target(raw)


@SLICE
@given(schedule_edits())
def test_validate_and_the_hw_plan_accept_or_refuse_every_edit_cleanly(edit):
    schedule_target(edit)


@SLICE
@given(st.binary(min_size=48, max_size=48))
def test_command_decoder_round_trips_any_record(raw):
    command_target(raw)


@SLICE
@given(ring_garbage())
def test_garbage_in_the_ring_writes_nothing_outside_the_registered_buffers(records):
    proxy_garbage_target(records)
