"""Custom prediction routines: packages as sdist, wheel or directory; isolation; load errors."""

import sys

import pytest

import predictors
from core.errors import ModelLoadError, PredictionFailed
from registry import artifacts
from tests.kit import modelkit


def _load(tmp_path, package, prediction_class="scale_predictor.ScalePredictor", factor=2.0):
    model_dir = modelkit.custom_model_dir(tmp_path / f"model-{factor}", factor)
    root = artifacts.unpack_package(str(package), tmp_path / "cache")
    predictor, _ = predictors.load(str(model_dir), None, prediction_class, [root])
    return predictor


@pytest.mark.parametrize("kind", ["sdist", "wheel", "dir"])
def test_package_kinds_load_and_pass_kwargs(tmp_path, kind):
    package = modelkit.custom_package(tmp_path, kind=kind)
    predictor = _load(tmp_path, package)
    assert predictor.predict([[1, 2], [3, 4]]) == [6.0, 14.0]
    out = predictor.predict([[1, 2]], threshold=5.0, extra="x")
    assert out == [{"score": 6.0, "above": True, "kwargs": ["extra"]}]
    assert predictor.accepted_parameters is None
    # Nothing was installed into the server's environment and the module is not left imported.
    assert "scale_predictor" not in sys.modules
    assert not any("scale_predictor" in p for p in sys.path)


def test_two_versions_may_ship_modules_with_the_same_name(tmp_path):
    v1 = modelkit.custom_package(tmp_path / "a", kind="dir")
    other = modelkit.CUSTOM_PREDICTOR_SOURCE.replace("self.factor * sum(row)", "-sum(row)")
    v2 = modelkit.custom_package(tmp_path / "b", source=other, kind="dir")
    p1 = _load(tmp_path / "a", v1)
    p2 = _load(tmp_path / "b", v2)
    assert p1.predict([[1, 1]]) == [4.0]
    assert p2.predict([[1, 1]]) == [-2]


def test_module_named_like_a_server_module_is_the_users(tmp_path):
    source = modelkit.CUSTOM_PREDICTOR_SOURCE.replace("ScalePredictor", "Predictor")
    package = modelkit.custom_package(tmp_path, module="core", source=source, kind="dir")
    predictor = _load(tmp_path, package, "core.Predictor")
    assert predictor.predict([[1, 2]]) == [6.0]
    import core
    from core import settings

    assert hasattr(settings, "Settings")  # the server's own package is back in place
    assert core.__file__.endswith("core/__init__.py")


def test_load_errors_are_clear(tmp_path):
    package = modelkit.custom_package(tmp_path, kind="dir")
    with pytest.raises(ModelLoadError, match="has no class 'Nope'"):
        _load(tmp_path, package, "scale_predictor.Nope")
    with pytest.raises(ModelLoadError, match="Could not import module 'missing_mod'"):
        _load(tmp_path, package, "missing_mod.Predictor")
    with pytest.raises(ModelLoadError, match="module.ClassName"):
        _load(tmp_path, package, "JustAClass")
    no_predict = "class P:\n    @classmethod\n    def from_path(cls, d):\n        return cls()\n"
    bad = modelkit.custom_package(tmp_path / "np", module="no_predict", source=no_predict, kind="dir")
    with pytest.raises(ModelLoadError, match=r"must define predict\(\)"):
        _load(tmp_path / "np", bad, "no_predict.P")
    failing = ("class P:\n    @classmethod\n    def from_path(cls, d):\n"
               "        raise IOError('weights missing')\n    def predict(self, i):\n        return i\n")
    bad = modelkit.custom_package(tmp_path / "f", module="failing", source=failing, kind="dir")
    with pytest.raises(ModelLoadError, match="from_path.*OSError: weights missing"):
        _load(tmp_path / "f", bad, "failing.P")


def test_error_inside_predict_is_prediction_failed(tmp_path):
    package = modelkit.custom_package(tmp_path, kind="dir")
    predictor = _load(tmp_path, package)
    with pytest.raises(PredictionFailed, match="TypeError"):
        predictor.predict([["a", 1]])


def test_unpack_rejects_unknown_files(tmp_path):
    (tmp_path / "pkg.rpm").write_bytes(b"x")
    with pytest.raises(ModelLoadError, match="not a source distribution"):
        artifacts.unpack_package(str(tmp_path / "pkg.rpm"), tmp_path / "cache")
    with pytest.raises(ModelLoadError, match="does not exist"):
        artifacts.unpack_package(str(tmp_path / "nope.tar.gz"), tmp_path / "cache")
    (tmp_path / "broken.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(ModelLoadError, match="Could not unpack"):
        artifacts.unpack_package(str(tmp_path / "broken.tar.gz"), tmp_path / "cache")


class _Importing:
    """A module whose `__file__`, when read, imports a module (adds to sys.modules): what another
    thread's import does while a custom predictor loads, at the worst moment, every time."""

    def __init__(self, name):
        self.name = name
        self.reads = 0

    @property
    def __file__(self):
        self.reads += 1
        sys.modules[f"{self.name}_{self.reads}"] = type(sys)(f"{self.name}_{self.reads}")
        return "/nowhere/helper.py"


def test_imports_by_other_threads_during_a_load_do_not_fail_it(tmp_path):
    package = modelkit.custom_package(tmp_path, kind="dir")
    sneaky = _Importing("racing_import")
    sys.modules["scale_predictor.sneaky"] = sneaky  # same top-level name: looked at by the load
    try:
        predictor = _load(tmp_path, package)
        assert predictor.predict([[1, 2]]) == [6.0]
        assert sneaky.reads >= 1
        assert sys.modules["scale_predictor.sneaky"] is sneaky  # set aside, then put back
    finally:
        for name in [n for n in sys.modules if n.startswith(("racing_import", "scale_predictor"))]:
            del sys.modules[name]
