"""config/prometheus-alerts.yml only alerts on metrics drkit exports, with their labels."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.metrics_catalog import exported_metrics
from tests.optional_tools import tool

RULES = Path(__file__).resolve().parents[2] / "config" / "prometheus-alerts.yml"
_METRIC = re.compile(r"\bdrkit_[a-z_]+")
_LABEL = re.compile(r"\$labels\.([a-z_]+)")


def _exported() -> dict[str, frozenset[str]]:
    return exported_metrics()


def _rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_every_rule_uses_exported_metrics_and_their_labels() -> None:
    exported = _exported()
    rules = _rules()
    assert rules
    for rule in rules:
        used = set(_METRIC.findall(rule["expr"]))
        assert used, rule["alert"]
        unknown = used - set(exported)
        assert not unknown, f"{rule['alert']}: drkit exports no {sorted(unknown)}"
        labels = set().union(*(exported[m] for m in used))
        text = " ".join(str(v) for v in rule.get("annotations", {}).values())
        missing = set(_LABEL.findall(text)) - labels
        assert not missing, f"{rule['alert']}: no label {sorted(missing)} on {sorted(used)}"


def test_prometheus_loads_the_rules() -> None:
    config = yaml.safe_load((RULES.parent / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/drkit-alerts.yml"]


# -- the rules evaluated by Prometheus's own tool ---------------------------------------------

CASES = Path(__file__).resolve().parents[1] / "data" / "prometheus" / "alerts_test.yml"
_SERIES = re.compile(r"^(drkit_[a-z_]+)(?:\{(.*)\})?$")


def _promtool() -> str:
    return tool("promtool", "PROMETHEUS", "apt install prometheus to run the alert rules' cases")


def test_promtool_accepts_the_rules_and_the_shipped_prometheus_config(tmp_path: Path) -> None:
    promtool = _promtool()
    rules = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert rules.returncode == 0, rules.stdout + rules.stderr
    # prometheus.yml names the rules where the compose stack mounts them: point it here.
    config = yaml.safe_load((RULES.parent / "prometheus.yml").read_text())
    config["rule_files"] = [str(RULES)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    checked = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in checked.stdout, checked.stdout


def test_every_alert_fires_in_its_case_and_stays_quiet_in_another() -> None:
    """Prometheus evaluates each rule over series shaped like drkit's (promtool test rules)."""
    done = subprocess.run(
        [_promtool(), "test", "rules", CASES.name],
        cwd=CASES.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_cases_cover_every_alert_both_ways_with_drkits_own_series() -> None:
    cases = yaml.safe_load(CASES.read_text())
    assert [(CASES.parent / f).resolve() for f in cases["rule_files"]] == [RULES]
    fires: set[str] = set()
    quiet: set[str] = set()
    exported = _exported()
    for case in cases["tests"]:
        for evaluation in case["alert_rule_test"]:
            (fires if evaluation["exp_alerts"] else quiet).add(evaluation["alertname"])
        for series in case["input_series"]:
            found = _SERIES.match(series["series"])
            assert found, series
            name, labels = found.group(1), found.group(2) or ""
            assert name in exported, f"drkit exports no {name}"
            used = {pair.split("=")[0] for pair in labels.split(",") if pair}
            assert used == exported[name], f"{series['series']}: drkit labels {exported[name]}"
    alerts = {rule["alert"] for rule in _rules()}
    assert fires == alerts, f"no firing case for {sorted(alerts - fires)}"
    assert quiet == alerts, f"no quiet case for {sorted(alerts - quiet)}"
