from __future__ import annotations

import random

from kai_scale.verdicts.change_points import detect_change


def _noise(count: int, *, seed: int, level: float = 100.0) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.uniform(-0.05, 0.05)) for _ in range(count)]


def test_a_clear_step_in_the_bad_direction_is_flagged() -> None:
    values = _noise(40, seed=1) + [v * 1.2 for v in _noise(1, seed=2)]
    found = detect_change(values, better="lower", min_change=0.05)
    assert found is not None
    assert found.start == 40
    assert found.p_value <= 0.001
    assert 10 < found.change_percent < 30


def test_pure_noise_is_not_flagged() -> None:
    flagged = [
        seed for seed in range(50) if detect_change(_noise(41, seed=seed), better="lower", min_change=0.05)
    ]
    assert flagged == []


def test_a_step_in_the_good_direction_is_not_flagged() -> None:
    values = _noise(40, seed=1) + [v * 0.8 for v in _noise(3, seed=2)]
    assert detect_change(values, better="lower", min_change=0.05) is None
    assert detect_change(values, better="higher", min_change=0.05) is not None


def test_a_change_below_the_minimum_is_not_flagged() -> None:
    values = [100.0] * 40 + [104.0, 104.0, 104.0]
    assert detect_change(values, better="lower", min_change=0.02) is not None
    assert detect_change(values, better="lower", min_change=0.05) is None


def test_too_little_history_judges_nothing() -> None:
    assert detect_change([100.0] * 5 + [200.0], better="lower", min_change=0.05) is None
