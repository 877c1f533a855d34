"""The README's quick start beyond its examples (those run in test_examples.py): `./mlemu models
list` finds the project of the server `make serve` starts, and that server prints no TensorFlow /
absl / oneDNN banners."""

import subprocess

import requests

from tests.conftest import ROOT

#: What TensorFlow, absl and oneDNN print on their own when a process imports TensorFlow.
BANNERS = ("oneDNN", "absl::InitializeLog", "cpu_feature_guard", "is deprecated",
           "Restoring parameters")


def test_the_launcher_lists_the_servers_project(demo_server):
    """`./mlemu models list` (what `make serve` suggests) with no --project finds `demo`, the
    project the server serves; another project's empty list names the server's."""
    listed = subprocess.run([str(ROOT / "mlemu"), "models", "list", "--url", demo_server.url],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert {"iris", "census_xgb", "threshold", "half_plus_three"} <= set(names)
    other = subprocess.run([str(ROOT / "mlemu"), "models", "list", "--url", demo_server.url,
                            "--project", "mlemu"], capture_output=True, text=True, timeout=120)
    assert other.returncode == 0 and other.stdout.strip() == "NAME  DEFAULT_VERSION_NAME"
    assert other.stderr.strip() == ("Listed 0 models in project [mlemu]; the server's default "
                                    "project is [demo] (--project demo).")


def test_serve_prints_no_native_banners(demo_server):
    requests.post(f"{demo_server.url}/v1/models/half_plus_three:predict",
                  json={"instances": [1.0]}, timeout=60).raise_for_status()
    output = demo_server.output()
    assert "Listening at" in output  # the log is the server's
    assert [banner for banner in BANNERS if banner in output] == [], output
