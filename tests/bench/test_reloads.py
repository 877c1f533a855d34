"""bench/reloads.py's pairing and statistics (no timings judged), and one run of it on a small
layout of real scikit-learn models: every reload a real reload, or nothing reported."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from bench import many, reloads


def test_plan_pairs_each_reload_with_a_first_load_of_the_same_slot_next_to_it() -> None:
    rounds = reloads.plan(["xgb", "logreg"], samples=12, batch=4)
    assert len(rounds) == 4  # a priming round, then 12 / 4 rounds of pairs
    assert all(not s.reload and not s.counted for s in rounds[0])
    first_loaded = {(s.kind, s.round, s.slot) for s in rounds[0]}
    for r, steps in enumerate(rounds[1:], start=1):
        pairs = [steps[i:i + 2] for i in range(0, len(steps), 2)]
        for pair in pairs:
            new, old = sorted(pair, key=lambda s: s.reload)
            assert not new.reload and old.reload and new.counted and old.counted
            assert new.kind == old.kind and new.slot == old.slot
            assert (new.round, old.round) == (r, r - 1)
            assert (old.kind, old.round, old.slot) in first_loaded  # loaded a round before
        first_loaded |= {(s.kind, s.round, s.slot) for s in steps if not s.reload}
    counted = Counter((s.kind, s.reload) for steps in rounds for s in steps if s.counted)
    assert counted == {("xgb", False): 12, ("xgb", True): 12, ("logreg", False): 12,
                       ("logreg", True): 12}


def test_plan_alternates_which_of_a_pair_goes_first() -> None:
    rounds = reloads.plan(["forest", "logreg", "tf", "xgb"], samples=40, batch=10)
    for kind in ("forest", "logreg", "tf", "xgb"):
        leads = [steps[i].reload for steps in rounds[1:] for i in range(0, len(steps), 2)
                 if steps[i].kind == kind]
        assert len(leads) == 40 and sum(leads) == 20  # reload first in half the pairs


def test_plan_rounds_samples_up_to_whole_rounds() -> None:
    rounds = reloads.plan(["tf"], samples=25, batch=10)
    assert sum(s.counted and s.reload for steps in rounds for s in steps) == 30


def test_summary_medians_quartiles_and_ratios() -> None:
    first = [1.0, 2.0, 3.0, 4.0, 5.0]
    again = [1.1, 2.2, 3.3, 4.4, 5.5]
    s = reloads.summary(first, again)
    assert s["first_s"] == 3.0 and s["reload_s"] == pytest.approx(3.3)
    assert s["first_iqr_s"] == 2.0
    assert s["reload_iqr_s"] == pytest.approx(2.2)
    assert s["ratio"] == pytest.approx(1.1)
    assert s["paired_ratio"] == pytest.approx(1.1)
    assert s["paired_ratio_quartiles"] == pytest.approx([1.1, 1.1])
    assert s["samples"] == 5
    # The ratio of medians and the median of pair ratios differ when pairs disagree.
    s = reloads.summary([1.0, 1.0, 4.0], [2.0, 0.5, 4.0])
    assert s["ratio"] == 2.0 and s["paired_ratio"] == 1.0 and s["paired_ratio_quartiles"] == [0.75, 1.5]
    with pytest.raises(ValueError):
        reloads.summary([1.0], [1.0, 2.0])


def _spec(tmp_path: Path, cap_mib: int) -> Path:
    """20 versions of two kinds (labels), each a copy of one of 3 real LogisticRegression models."""
    templates = list(many.build(tmp_path / "templates", 3).values())
    dirs, kinds, sources = {}, {}, {}
    for i in range(20):
        name = f"m{i:02d}"
        source = templates[i % 3]
        shutil.copytree(source, tmp_path / "layout" / name)
        dirs[name], kinds[name] = str(tmp_path / "layout" / name), "a" if i % 2 else "b"
        sources[name] = str(source)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"dirs": dirs, "kinds": kinds, "sources": sources,
                                "cap_mib": cap_mib}))
    return spec


def test_a_run_times_real_reloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(reloads, "SAMPLES", 4)
    monkeypatch.setattr(reloads, "BATCH", 2)
    reloads.main(str(_spec(tmp_path, cap_mib=1)))  # about 4 of these versions fit in 1 MiB
    out = json.loads(capsys.readouterr().out)
    assert sorted(out) == ["a", "b"]
    for figures in out.values():
        assert figures["samples"] == 4
        assert figures["first_s"] > 0 and figures["reload_s"] > 0


def test_a_layout_that_fits_under_the_cap_is_not_measured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(reloads, "SAMPLES", 2)
    monkeypatch.setattr(reloads, "BATCH", 2)
    reloads.main(str(_spec(tmp_path, cap_mib=100)))  # nothing is ever pushed out: no reload
    assert json.loads(capsys.readouterr().out) == {}


def test_thousand_reports_each_frameworks_medians_and_spreads() -> None:
    from bench import thousand

    t = {"versions": 1000, "reload": {"xgb": reloads.summary([0.004, 0.005, 0.008],
                                                             [0.0045, 0.005, 0.007])}}
    rows = {label: values["mlemu"] for label, _, values, _ in thousand.report_rows(t)}
    assert rows["thousand: xgb first load CPU ms (median)"] == pytest.approx(5.0)
    assert rows["thousand: xgb reload after eviction CPU ms (median)"] == pytest.approx(5.0)
    assert rows["thousand: xgb first load CPU ms, interquartile range"] == pytest.approx(2.0)
    assert rows["thousand: xgb reload after eviction CPU ms, interquartile range"] == \
        pytest.approx(1.25)
    assert not any("forest" in label for label in rows)  # not measured: no row
