"""What the metrics keep for a version follows the load (observability/metrics.Instruments.forget,
called by Deployments.trim on the emulator's tick): after versions were served and unloaded, no
instruments, request children or tally rows are held for them, and the counters exposed for a
version unloaded and loaded again never go back, in one process and in multiprocess mode (where
the label children go too and a child made again reads its value back from the file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from observability.exposition import render
from observability.metrics import Instruments
from registry.deployments import Deployments
from tests.registry.test_deployments_cap import Counting, version

ROOT = Path(__file__).resolve().parents[2]
NAMES = [f"v{i}" for i in range(8)]


def serve(d: Deployments, instruments: Instruments, name: str) -> None:
    """One request to `name` as the data plane records it: its model call and its request."""
    assert d.get(version(name)).predict([1, 2]) == [2, 4]
    instruments.request(("http", "ml", "predict", "m", name, "200"), 0.01)


def exposed(instruments: Instruments, metric: str, name: str) -> float:
    """The value GET /metrics shows for `metric` of model m, version `name`."""
    body = render(instruments, None)[0].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(metric + "{") and f'version="{name}"' in line
               and 'model="m"' in line)


def held_keys(d: Deployments, instruments: Instruments) -> set[Any]:
    """The tally keys of the versions loaded now (their instruments and request counters)."""
    keys: set[Any] = set()
    for name in d.loaded():
        vid = name.rsplit("/", 1)[1]
        keys.update(instruments.version(name).keys())
        keys.add(("http", "ml", "predict", "m", vid, "200"))  # a request row's key: its labels
    return keys


def test_unloaded_versions_leave_no_rows_and_their_counters_stay(tmp_path: Path) -> None:
    instruments = Instruments()
    d = Deployments(tmp_path, loader=Counting(), max_loaded=2, instruments=instruments)
    for name in NAMES:
        serve(d, instruments, name)
    instruments.flush()
    before = {name: exposed(instruments, "mlemu_requests_total", name) for name in NAMES}
    assert before == dict.fromkeys(NAMES, 1.0)
    assert d.trim(release=lambda: None)
    loaded = {("m", name.rsplit("/", 1)[1]) for name in d.loaded()}
    assert loaded == {("m", "v6"), ("m", "v7")}
    assert instruments.held() == loaded
    # Rows of the loaded only: each one's model call row and request row.
    recorded = instruments.tally.recorded()
    assert set(recorded) <= held_keys(d, instruments) and len(recorded) == 4
    assert instruments.tally.retiring()  # their rows wait for one last flush...
    assert not d.trim(release=lambda: None)
    assert not instruments.tally.retiring()  # ...which the next tick gave them
    # In one process the label children are the values: they stay, and nothing went back.
    assert {name: exposed(instruments, "mlemu_requests_total", name) for name in NAMES} == before
    serve(d, instruments, "v0")  # loaded again
    instruments.flush()
    assert exposed(instruments, "mlemu_requests_total", "v0") == 2.0
    assert exposed(instruments, "mlemu_model_call_duration_seconds_count", "v0") == 2.0
    assert exposed(instruments, "mlemu_instances_per_request_sum", "v0") == 4.0


MULTIPROCESS = """
import json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.observability.test_forget import NAMES, exposed, held_keys, serve
from observability.metrics import Instruments
from registry.deployments import Deployments
from tests.registry.test_deployments_cap import Counting

instruments = Instruments()
d = Deployments(Path({tmp!r}), loader=Counting(), max_loaded=2, instruments=instruments)
out = {{}}
for name in NAMES:
    serve(d, instruments, name)
stale = instruments.version("projects/p/models/m/versions/v0")  # a request still finishing
d.trim(release=lambda: None)
d.trim(release=lambda: None)
out["held"] = sorted(instruments.held())
recorded = instruments.tally.recorded()
out["rows_of_loaded_only"] = set(recorded) <= held_keys(d, instruments) and len(recorded) == 4
out["children"] = sorted({{s.labels["version"] for f in instruments.metrics.requests.collect()
                         for s in f.samples}})
out["after_forget"] = {{n: exposed(instruments, "mlemu_requests_total", n) for n in NAMES}}
serve(d, instruments, "v0")  # loaded again: its children are made again, read from the file
stale.model_call(0.01, [1, 2, 3])  # through the forgotten instruments: counted all the same
instruments.flush()
out["v0_requests"] = exposed(instruments, "mlemu_requests_total", "v0")
out["v0_calls"] = exposed(instruments, "mlemu_model_call_duration_seconds_count", "v0")
out["v0_instances"] = exposed(instruments, "mlemu_instances_per_request_sum", "v0")
print(json.dumps(out))
"""


def test_in_multiprocess_mode_the_children_go_and_come_back_with_their_values(
        tmp_path: Path) -> None:
    (tmp_path / "metrics").mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
           "PYTHONPATH": str(ROOT)}
    code = textwrap.dedent(MULTIPROCESS.format(root=str(ROOT), tmp=str(tmp_path)))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["held"] == [["m", "v6"], ["m", "v7"]]
    assert out["rows_of_loaded_only"]
    assert out["children"] == ["v6", "v7"]  # the others' children were removed...
    assert out["after_forget"] == dict.fromkeys(NAMES, 1.0)  # ...their values kept in the files
    assert out["v0_requests"] == 2.0
    assert out["v0_calls"] == 3.0
    assert out["v0_instances"] == 7.0


@pytest.mark.slow
def test_a_live_server_counts_every_request_of_versions_unloaded_and_loaded_again(
        tmp_path: Path, live_server: Any) -> None:
    """`app.py serve` (gunicorn, multiprocess metrics) with room for one loaded version: every
    request of four versions in turn reloads one, and between rounds the ticks forget the
    unloaded ones' metrics; /metrics counts each request exactly, round after round."""
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    from tests.kit.modelkit import bootstrap_file, sklearn_model

    names = ["a", "b", "c", "d"]
    for i, name in enumerate(names):
        sklearn_model(tmp_path / "models" / name, seed=i)
    config = bootstrap_file(tmp_path / "mlemu.yaml", {name: {"versions": {"v1": {
        "deploymentUri": str(tmp_path / "models" / name), "framework": "SCIKIT_LEARN"}}}
        for name in names})
    server = live_server(config, env={"MLEMU_MAX_LOADED_VERSIONS": "1"})
    with requests.Session() as http:
        for round_ in range(1, 4):
            for name in names:
                r = http.post(f"{server.url}/v1/projects/p/models/{name}/versions/v1:predict",
                              json={"instances": [[0.5, -1.0, 2.0, 0.1]]}, timeout=120)
                assert r.status_code == 200, r.text
            # Waiting lets the ticks (every 2 s) forget the unloaded versions between rounds;
            # the counts must be exact whether or not they did.
            time.sleep(5)
            text = http.get(f"{server.url}/metrics", timeout=60).text
            counts: dict[tuple[str, str], float] = {}
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if s.name in ("mlemu_requests_total",  # not /metrics' own (model "")
                                  "mlemu_model_call_duration_seconds_count") and s.labels["model"]:
                        key = (s.name, s.labels["model"])
                        counts[key] = counts.get(key, 0.0) + s.value
            assert counts == {(metric, name): float(round_) for name in names for metric in
                              ("mlemu_requests_total", "mlemu_model_call_duration_seconds_count")}
    assert "Traceback" not in server.output()
