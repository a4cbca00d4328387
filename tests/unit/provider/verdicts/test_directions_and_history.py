from __future__ import annotations

import pytest
from pydantic import ValidationError

from kai_scale.publishing.verdicts_step import detail_rules
from kai_scale.verdicts.directions import DetailRule, default_rule, rule_for
from kai_scale.verdicts.history import comparable_entries
from kai_scale_model.scenario import Scenario


@pytest.mark.parametrize(
    ("detail", "better"),
    [
        ("time", "lower"),
        ("pods per second (p50)", "higher"),
        ("throughput", "higher"),
        ("jobs", "lower"),
        ("create rate (pods/s)", "higher"),
        ("throughput p99 (pods/s)", "higher"),
        ("time to all scheduled (seconds)", "lower"),
        # Whole words: no "rate" in these, and an error rate is better low.
        ("generated pods", "lower"),
        ("migrated jobs", "lower"),
        ("error rate", "lower"),
        ("failure rate (/s)", "lower"),
    ],
)
def test_default_direction_from_the_details_name(detail: str, better: str) -> None:
    assert default_rule(detail).better == better


def _scenario(detail_rules: list[dict[str, object]]) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "fill",
            "description": "fill the cluster",
            "run": {"kind": "ginkgo", "focus": "Fill"},
            "timeout": "30m",
            "detail_rules": detail_rules,
        }
    )


def test_a_scenario_rule_overrides_the_default() -> None:
    rules = detail_rules(
        [
            _scenario([{"test_name": "Fill", "detail": "time", "better": "higher", "min_change": 0.1}]),
            _scenario([{"test_name": "Fill", "detail": "pods per second", "min_change": 0.2}]),
        ]
    )
    assert rule_for("Fill", "time", overrides=rules) == DetailRule(better="higher", min_change=0.1)
    assert rule_for("Fill", "pods per second", overrides=rules) == DetailRule(better="higher", min_change=0.2)
    assert rule_for("Other", "time", overrides=rules) == DetailRule(better="lower", min_change=0.05)


def test_a_setting_can_be_left_unjudged() -> None:
    rules = detail_rules([_scenario([{"test_name": "Fill", "detail": "jobs", "judge": False}])])
    assert rule_for("Fill", "jobs", overrides=rules) == DetailRule(better="lower", judge=False)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"test_name": "Fill", "detail": "time", "better": "faster"}, "better"),
        ({"test_name": "Fill", "detail": "time", "min_change": -0.1}, "min_change"),
        ({"test_name": "Fill", "detail": "time", "threshold": 1}, "threshold"),
    ],
)
def test_a_bad_rule_names_the_field(rule: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=rf"detail_rules\.0\.{message}"):
        _scenario([rule])


def test_comparable_entries_are_earlier_successful_runs_of_the_same_node_count() -> None:
    manifest = {
        "runs": [
            {"run_id": "c", "timestamp": "2026-11-03T02:00:00Z", "node_count": 500, "status": "success"},
            {"run_id": "a", "timestamp": "2026-11-01T02:00:00Z", "node_count": 500, "status": "success"},
            {"run_id": "b", "timestamp": "2026-11-02T02:00:00Z", "node_count": 100, "status": "success"},
            {"run_id": "f", "timestamp": "2026-11-02T03:00:00Z", "node_count": 500, "status": "failure"},
            {"run_id": "i", "timestamp": "2026-11-02T04:00:00Z", "node_count": 500, "status": "incomplete"},
            {"run_id": "new", "timestamp": "2026-11-04T02:00:00Z", "node_count": 500, "status": "success"},
            {"run_id": "later", "timestamp": "2026-11-05T02:00:00Z", "node_count": 500, "status": "success"},
        ]
    }
    found = comparable_entries(manifest, run_id="new", node_count=500)
    assert [run["run_id"] for run in found] == ["a", "c"]
    assert [run["run_id"] for run in comparable_entries(manifest, run_id="new", node_count=500, last=1)] == [
        "c"
    ]
