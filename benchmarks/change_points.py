"""Change-point detection of kai_scale.verdicts: detection delay, false flags, time with a long history.

Usage: ``nice .venv/bin/python benchmarks/change_points.py [--trials 200]``. Prints a Markdown table:

- step: 60 nightly values, noise +-5 % (uniform, and normal with sigma 5 %), a 20 % step at run 40 in
  the bad direction; each night is judged as the newest run; the delay is the first flagged night
  minus 40 (target <= 3), and nights flagged before 40 count as false flags;
- noise: 200 nights of pure noise, each night from the 11th judged as the newest; false flags per night
  judged (target <= 1 %);
- acknowledged: the same step at run 40, acknowledged, then a second 20 % step 3, 4 or 5 runs later
  (flagged within 3 runs of it?), or none (false flags from run 40 to 59);
- time: one run of 6 tests x 5 details judged against a 10,000-run history (target <= 2 s).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from kai_scale.verdicts.change_points import detect_change
from kai_scale.verdicts.history import HistoricRun
from kai_scale.verdicts.regressions import find_regressions

Noise = Callable[[random.Random], float]
NOISES: dict[str, Noise] = {
    "uniform +-5 %": lambda rng: rng.uniform(-0.05, 0.05),
    "normal sigma 5 %": lambda rng: rng.gauss(0, 0.05),
}


def _flagged_nights(values: list[float], *, accepted: int | None = None) -> list[int]:
    """Nights flagged when judged as the newest run (from the acknowledged run on, when there is one)."""
    return [
        n
        for n in range(accepted or 1, len(values))
        if detect_change(values[: n + 1], better="lower", min_change=0.05, accepted=accepted)
    ]


def step(noise: Noise, trials: int) -> tuple[list[int], int, int]:
    delays, missed, early = [], 0, 0
    for seed in range(trials):
        rng = random.Random(seed)
        values = [100 * (1.2 if i >= 40 else 1) * (1 + noise(rng)) for i in range(60)]
        nights = _flagged_nights(values)
        early += sum(1 for n in nights if n < 40)
        after = [n for n in nights if n >= 40]
        if after:
            delays.append(after[0] - 40)
        else:
            missed += 1
    return delays, missed, early


def noise_only(noise: Noise, trials: int) -> tuple[int, int]:
    flags = judged = 0
    for seed in range(trials):
        rng = random.Random(10_000 + seed)
        values = [100 * (1 + noise(rng)) for _ in range(200)]
        flags += len(_flagged_nights(values))
        judged += 200 - 10
    return flags, judged


def acknowledged_step(noise: Noise, trials: int, gap: int | None) -> tuple[int, int]:
    """Second steps flagged within 3 runs, and flags from the acknowledged run 40 to the second step."""
    flagged = false = 0
    for seed in range(trials):
        rng = random.Random(seed)
        second = 40 + gap if gap is not None else 60
        values = [100 * 1.2 ** ((i >= 40) + (i >= second)) * (1 + noise(rng)) for i in range(60)]
        nights = _flagged_nights(values, accepted=40)
        false += sum(1 for n in nights if n < second)
        flagged += any(second <= n <= second + 3 for n in nights)
    return flagged, false


def long_history() -> float:
    rng = random.Random(1)

    def tests() -> list[dict[str, object]]:
        details = {f"d{j}": 100 * (1 + rng.uniform(-0.05, 0.05)) for j in range(4)}
        return [
            {"test_name": f"t{i}", "status": "success", "details": {**details, "time": "6m36.7s"}}
            for i in range(6)
        ]

    history = [HistoricRun(run_id=f"r{i}", tests=tests()) for i in range(10_000)]
    times = []
    for _ in range(5):
        start = time.perf_counter()
        find_regressions(run_id="new", node_count=500, tests=tests(), history=history)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    print("| measure | noise | result | target |\n|---|---|---|---|")
    for name, noise in NOISES.items():
        delays, missed, early = step(noise, args.trials)
        within = sum(1 for d in delays if d <= 3)
        print(
            f"| 20 % step at run 40 of 60: flagged within 3 runs | {name} | {within}/{args.trials} "
            f"(median delay {statistics.median(delays) if delays else '-'}, missed {missed}, "
            f"flags before the step {early}) | within 3 runs |"
        )
        flags, judged = noise_only(noise, args.trials)
        print(
            f"| pure noise, 200 nights: false flags | {name} | "
            f"{flags}/{judged} = {flags / judged:.2%} | <= 1 % |"
        )
        _, false = acknowledged_step(noise, args.trials, None)
        print(
            f"| 20 % step at run 40 acknowledged: flags on runs 40-59 | {name} | "
            f"{false}/{20 * args.trials} = {false / (20 * args.trials):.2%} | <= 1 % |"
        )
        for gap in (3, 4, 5):
            flagged, false = acknowledged_step(noise, args.trials, gap)
            print(
                f"| ... and a second 20 % step {gap} runs later: flagged within 3 runs | {name} | "
                f"{flagged}/{args.trials} ({false} flags before it) | within 3 runs |"
            )
    print(
        f"| one run (6 tests x 5 details), 10,000-run history | - | {long_history() * 1000:.1f} ms | <= 2 s |"
    )


if __name__ == "__main__":
    main()
