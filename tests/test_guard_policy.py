"""The guard's policy: every transition, with the clock injected (no test here sleeps)."""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.guard.config import GuardConfig
from harness.guard.policy import (
    Action,
    GuardState,
    decide,
    expire,
    is_hot,
    max_pause_deadline,
    pause_failed,
    thermal_reasons,
)
from harness.guard.samples import THERMAL_REASONS, Limit, Sample, ZoneTemp
from support.properties import examples

CONFIG = GuardConfig(pause_at_c=85, resume_at_c=78, min_pause_s=30, max_pause_s=300, missing_polls=3)


def sample(temp: Optional[float], reasons: Optional[int] = None) -> Sample:
    return Sample(time_us=0, temp_c=temp, reasons=reasons)


def run(
    readings: Sequence[Optional[float] | Sample | None],
    config: GuardConfig = CONFIG,
    step_s: float = 1.0,
    state: GuardState = GuardState(),
) -> list:
    """Feed readings one poll apart; (time, action, reason, note) for each poll."""
    out = []
    for i, reading in enumerate(readings):
        current = reading if isinstance(reading, Sample) or reading is None else sample(reading)
        state, decision = decide(config, state, current, i * step_s)
        out.append((i * step_s, decision.action, decision.reason, decision.note, decision.peak_c))
    return out


def actions(trace: Iterable) -> list[tuple[float, Action]]:
    return [(t, action) for t, action, *_ in trace if action is not Action.NONE]


def test_cool_readings_do_nothing() -> None:
    assert actions(run([40, 60, 77.9, 84.9, 50])) == []


def test_pause_at_the_threshold_with_the_reading_in_the_reason() -> None:
    trace = run([80, 84.9, 85.0])
    assert actions(trace) == [(2.0, Action.PAUSE)]
    assert trace[2][2] == "GPU 85.0 C >= pause_at_c 85 C"
    assert trace[2][4] == 85.0  # the window's peak so far


def test_hysteresis_no_flapping_in_the_band() -> None:
    # paused at 86, hovering between resume_at and pause_at: stays paused; resumed at 78, hovering: stays running
    temps = [86] + [84, 79, 83, 78.1] * 10 + [78.0] + [84.9, 80, 79, 84] * 10
    trace = run(temps)
    assert actions(trace) == [(0.0, Action.PAUSE), (41.0, Action.RESUME)]
    assert trace[41][2] == "cooled to 78.0 C"


def test_min_pause_holds_a_cool_run_paused_until_it_has_lasted() -> None:
    trace = run([90] + [60] * 40, step_s=1.0)
    assert actions(trace) == [(0.0, Action.PAUSE), (30.0, Action.RESUME)]
    no_min = CONFIG.model_copy(update={"min_pause_s": 0.0})
    assert actions(run([90, 60], no_min)) == [(0.0, Action.PAUSE), (1.0, Action.RESUME)]


def test_max_pause_resumes_and_pauses_again_if_still_hot() -> None:
    trace = run([90] * 12, step_s=30.0)  # never cools
    assert actions(trace) == [(0.0, Action.PAUSE), (300.0, Action.RESUME), (330.0, Action.PAUSE)]
    assert trace[10][2] == "max_pause_s 300 s reached; resuming"
    assert trace[10][4] == 90.0


def test_max_pause_stop_stops_once_and_the_policy_goes_quiet() -> None:
    stop = CONFIG.model_copy(update={"on_max_pause": "stop"})
    trace = run([90] * 15, stop, step_s=30.0)
    assert actions(trace) == [(0.0, Action.PAUSE), (300.0, Action.STOP)]
    assert "not cooled to resume_at_c within max_pause_s 300 s" in trace[10][2]


@pytest.mark.parametrize("bit", sorted(THERMAL_REASONS.values()))
def test_each_thermal_reason_bit_pauses_a_cool_run_and_holds_it_until_cleared(bit: int) -> None:
    no_min = CONFIG.model_copy(update={"min_pause_s": 0.0})
    trace = run([sample(70, 0), sample(70, bit), sample(60, bit), sample(60, bit | 0x1), sample(60, 0)], no_min)
    assert actions(trace) == [(1.0, Action.PAUSE), (4.0, Action.RESUME)]
    assert trace[1][2] == "clock event " + thermal_reasons(bit)[0]


def test_power_cap_idle_and_other_reasons_do_not_pause() -> None:
    assert actions(run([sample(70, 0x1), sample(70, 0x4), sample(70, 0x80 | 0x100 | 0x2)])) == []


def test_thermal_constants_are_nvidia_ml_pys() -> None:
    pynvml = pytest.importorskip("pynvml")
    for name, bit in THERMAL_REASONS.items():
        assert getattr(pynvml, f"nvmlClocksEventReason{name}") == bit
    assert thermal_reasons(0x20 | 0x40 | 0x8 | 0x4) == ["HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown"]


def test_missing_readings_after_a_hot_one_pause_on_the_nth_poll_with_one_note() -> None:
    trace = run([80, None, None, None, None])
    assert actions(trace) == [(3.0, Action.PAUSE)]
    notes = [note for *_, note, _ in trace if note]
    assert notes == ["no temperature reading for 3 polls (last 80.0 C); pausing the run"]
    assert trace[3][2] == "no temperature reading for 3 polls (last 80.0 C)"
    assert trace[3][4] == 80.0


def test_missing_readings_after_a_cool_one_carry_on_and_the_return_is_noted() -> None:
    trace = run([60, None, None, None, None, None, 61])
    assert actions(trace) == []
    notes = [note for *_, note, _ in trace if note]
    assert notes == [
        "no temperature reading for 3 polls (last 60.0 C); carrying on",
        "temperature readings back (61.0 C) after 5 missing polls",
    ]


def test_a_pause_never_ends_without_a_cool_reading_except_through_max_pause() -> None:
    trace = run([90] + [None] * 20, step_s=20.0)
    assert actions(trace) == [(0.0, Action.PAUSE), (300.0, Action.RESUME), (320.0, Action.PAUSE)]
    assert "no temperature reading" in trace[16][2]  # re-paused for the missing readings, the last one hot


def test_on_missing_pause_and_carry_on() -> None:
    always = CONFIG.model_copy(update={"on_missing": "pause"})
    assert actions(run([60, None, None, None], always)) == [(3.0, Action.PAUSE)]
    assert actions(run([None, None, None], always)) == [(2.0, Action.PAUSE)]  # never read at all
    never = CONFIG.model_copy(update={"on_missing": "carry_on"})
    assert actions(run([84, None, None, None, None], never)) == []


def test_a_missing_reading_pause_resumes_on_a_cool_reading() -> None:
    no_min = CONFIG.model_copy(update={"min_pause_s": 0.0})
    trace = run([80, None, None, None, 79, 77], no_min)
    assert actions(trace) == [(3.0, Action.PAUSE), (5.0, Action.RESUME)]


def test_the_peak_is_the_hottest_reading_of_the_window() -> None:
    trace = run([86, 88, 91.5, 87, None, 80] + [70] * 30)
    resume = [row for row in trace if row[1] is Action.RESUME][0]
    assert resume[4] == 91.5


def test_is_hot_marks_the_band_and_pauses() -> None:
    state, _ = decide(CONFIG, GuardState(), sample(78.0), 0.0)
    assert is_hot(state)
    state, _ = decide(CONFIG, GuardState(), sample(77.9), 0.0)
    assert not is_hot(state)
    state, _ = decide(CONFIG, GuardState(), sample(77.9, 0x20), 0.0)
    assert is_hot(state) and state.paused


temps = st.one_of(st.none(), st.floats(min_value=30, max_value=100, allow_nan=False))


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.tuples(temps, st.sampled_from([0, 0, 0, 0x20])), max_size=200),
    st.sampled_from(["pause_if_hot", "pause", "carry_on"]),
)
def test_windows_alternate_and_resumes_are_cool_or_timed_out(readings: list, on_missing: str) -> None:
    config = CONFIG.model_copy(update={"on_missing": on_missing, "min_pause_s": 5.0, "max_pause_s": 60.0})
    state, paused_at, paused = GuardState(), None, False
    for i, (temp, reasons) in enumerate(readings):
        now = i * 2.0
        state, decision = decide(config, state, sample(temp, reasons), now)
        if decision.action is Action.PAUSE:
            assert not paused
            paused, paused_at = True, now
        elif decision.action is Action.RESUME:
            assert paused
            held = now - paused_at
            timed_out = held >= config.max_pause_s
            assert timed_out or (temp is not None and temp <= config.resume_at_c and not reasons and held >= 5.0)
            paused = False
        assert state.paused == paused
        if temp is not None and temp >= config.pause_at_c:
            assert paused or decision.action is Action.RESUME  # hot and running only on a max-pause thaw


# --------------------------------------------------------------------------- zones beside the GPU

SOC = Limit(94.5, 87.5, "94.5 C, 10 C below its critical point 104.5 C", 104.5, "critical")


def with_zone(gpu: Optional[float], soc: Optional[float], reasons: Optional[int] = None) -> Sample:
    """The GPU and a `soc` zone whose critical trip point is 104.5 C (its pause point 94.5 C, resume 87.5 C)."""
    return Sample(0, temp_c=gpu, reasons=reasons, zones=(ZoneTemp("thermal_zone3", "thermal_zone3 (soc)", soc, SOC),))


def test_a_zone_past_its_own_pause_point_pauses_a_cool_gpu_and_the_reason_names_it() -> None:
    trace = run([with_zone(60, 90), with_zone(60, 94.4), with_zone(60, 94.5)])
    assert actions(trace) == [(2.0, Action.PAUSE)]
    assert trace[2][2] == "thermal_zone3 (soc) 94.5 C >= 94.5 C, 10 C below its critical point 104.5 C"
    assert trace[2][4] == 94.5  # the hottest reading of the window


def test_a_zone_below_its_own_pause_point_does_not_pause_however_far_above_pause_at_c() -> None:
    assert actions(run([with_zone(60, 90.0)] * 5)) == []  # 90 C >= pause_at_c 85, but the soc's limit is 94.5


def test_the_reason_names_the_temperature_furthest_past_its_limit() -> None:
    ((_, _, gpu_reason, *_),) = run([with_zone(90, 95)])  # GPU 5 C past, soc 0.5 C past
    assert gpu_reason == "GPU 90.0 C >= pause_at_c 85 C"
    ((_, _, soc_reason, *_),) = run([with_zone(86, 99)])  # GPU 1 C past, soc 4.5 C past
    assert soc_reason.startswith("thermal_zone3 (soc) 99.0 C >= 94.5 C")


def test_resume_needs_every_watched_temperature_at_or_below_its_own_resume_point() -> None:
    no_min = CONFIG.model_copy(update={"min_pause_s": 0.0})
    trace = run([with_zone(60, 96), with_zone(60, 90), with_zone(77, 88), with_zone(77, 87.5)], no_min)
    assert actions(trace) == [(0.0, Action.PAUSE), (3.0, Action.RESUME)]
    assert trace[3][2] == "cooled: GPU 77.0 C, thermal_zone3 (soc) 87.5 C"


def test_a_hot_zone_that_goes_unread_keeps_the_run_paused_on_its_last_reading() -> None:
    no_min = CONFIG.model_copy(update={"min_pause_s": 0.0})
    trace = run([with_zone(60, 96), with_zone(60, None), with_zone(60, None), with_zone(60, 80)], no_min)
    assert actions(trace) == [(0.0, Action.PAUSE), (3.0, Action.RESUME)]  # never on the GPU's reading alone


def test_zones_alone_are_readings_and_none_of_them_is_a_missing_one() -> None:
    trace = run([with_zone(None, 50), with_zone(None, None), with_zone(None, None), with_zone(None, None)])
    assert [note for *_, note, _ in trace if note] == ["no temperature reading for 3 polls (last 50.0 C); carrying on"]


def test_the_max_pause_limit_is_known_ahead_and_acted_on_without_a_reading() -> None:
    state, decision = decide(CONFIG, GuardState(), sample(90), 10.0)
    assert decision.action is Action.PAUSE and max_pause_deadline(CONFIG, state) == 310.0
    assert expire(CONFIG, state, 309.999) == (state, expire(CONFIG, state, 309.999)[1])
    assert expire(CONFIG, state, 309.999)[1].action is Action.NONE
    ended, decision = expire(CONFIG, state, 310.0)
    assert decision.action is Action.RESUME and decision.reason == "max_pause_s 300 s reached; resuming"
    assert decision.peak_c == 90.0 and not ended.paused and max_pause_deadline(CONFIG, ended) is None
    stop = CONFIG.model_copy(update={"on_max_pause": "stop"})
    stopped, decision = expire(stop, state, 310.0)
    assert decision.action is Action.STOP and stopped.stopped and max_pause_deadline(stop, stopped) is None


def test_a_pause_the_engine_refused_stops_the_guard_by_default_and_continue_carries_on() -> None:
    state, decision = decide(CONFIG, GuardState(), sample(95.1), 0.0)
    assert decision.action is Action.PAUSE and state.paused

    stopped, stop = pause_failed(CONFIG, state, "OCI runtime pause failed: unable to freeze")
    assert stop.action is Action.STOP and stop.peak_c == 95.1
    assert stop.reason == "could not pause it at 95.1 C: OCI runtime pause failed: unable to freeze"
    assert stopped.stopped and not stopped.paused and max_pause_deadline(CONFIG, stopped) is None
    assert decide(CONFIG, stopped, sample(99.0), 1.0)[1].action is Action.NONE  # quiet: the run is being stopped

    carry_on = CONFIG.model_copy(update={"on_pause_failure": "continue"})
    going, note = pause_failed(carry_on, state, "unable to freeze")
    assert note.action is Action.NONE and not going.paused and not going.stopped
    assert note.note == (
        "could not pause it at 95.1 C: unable to freeze; the run goes on unpaused (guard.on_pause_failure: continue) "
        "and the next hot poll tries again"
    )
    assert decide(carry_on, going, sample(95.0), 1.0)[1].action is Action.PAUSE  # tried again at the next hot poll


def test_a_pause_on_missing_readings_that_fails_names_its_reason_not_a_temperature() -> None:
    blind = CONFIG.model_copy(update={"on_missing": "pause"})
    state = GuardState()
    for second in range(3):
        state, decision = decide(blind, state, None, float(second))
    assert decision.action is Action.PAUSE
    _, stop = pause_failed(blind, state, "unable to freeze")
    assert stop.reason == "could not pause it (no temperature reading for 3 polls (never read)): unable to freeze"
