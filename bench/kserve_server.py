"""KServe's sklearnserver / xgbserver, as `make bench` runs them: one model per server process,
started the way KServe's images start them, inside bench/.venvs/kserve (not mlemu's environment).

The real servers (kserve/kserve python/sklearnserver and python/xgbserver, 0.21) are not
published on PyPI (they ship in KServe's container images), so this file does what they do, fact
by fact, on the `kserve` package from PyPI:
- arguments: kserve.model_server.parser plus --model_dir (and xgbserver's --nthread, default 1),
  `kserve.ModelServer()` built from those arguments, so every server default is KServe's own
  (gRPC on, latency logging on, uvicorn workers from --workers);
- load: the one model file in model_dir (sklearnserver: .joblib/.pkl/.pickle with joblib;
  xgbserver: .bst/.json/.ubj read as bytes into `xgb.Booster(params={"nthread": n})`);
- predict (sync, as theirs): `kserve.utils.utils.get_predict_input`, the model
  (`predict`, or `predict_proba` when PREDICT_PROBA=true; `xgb.DMatrix(instances, nthread=n)`
  then `booster.predict`), `get_predict_response`, errors as `InferenceError`.
So V1 REST (`/v1/models/<name>:predict`), V2 REST and V2 gRPC answer as the real servers do.

Usage: python kserve_server.py --model_name NAME --model_dir DIR [--nthread N] [kserve flags]
"""

import argparse
import os

import joblib
import kserve
from kserve.errors import InferenceError, ModelMissingError
from kserve.utils.utils import get_predict_input, get_predict_response

SKLEARN_FILES = (".joblib", ".pkl", ".pickle")
XGBOOST_FILES = (".bst", ".json", ".ubj")


def model_file(model_dir: str) -> str:
    files = [f for f in os.listdir(model_dir) if f.endswith(SKLEARN_FILES + XGBOOST_FILES)
             and os.path.isfile(os.path.join(model_dir, f))]
    if len(files) != 1:
        raise ModelMissingError(model_dir)
    return os.path.join(model_dir, files[0])


class BenchModel(kserve.Model):
    def __init__(self, name: str, model_dir: str, nthread: int) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.nthread = nthread
        self.ready = False

    def load(self) -> bool:
        path = model_file(self.model_dir)
        if path.endswith(XGBOOST_FILES):
            import xgboost as xgb

            with open(path, "rb") as f:
                self._booster = xgb.Booster(params={"nthread": self.nthread},
                                            model_file=bytearray(f.read()))
            self._model = None
        else:
            self._model = joblib.load(path)
        self.ready = True
        return self.ready

    def predict(self, payload, headers=None):
        try:
            instances = get_predict_input(payload)
            if self._model is None:
                import xgboost as xgb

                result = self._booster.predict(xgb.DMatrix(instances, nthread=self.nthread))
            elif (os.environ.get("PREDICT_PROBA", "false").lower() == "true"
                  and hasattr(self._model, "predict_proba")):
                result = self._model.predict_proba(instances)
            else:
                result = self._model.predict(instances)
            return get_predict_response(payload, result, self.name)
        except Exception as exc:
            raise InferenceError(str(exc)) from exc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--nthread", default=1, type=int)  # xgbserver's default
    args, _ = parser.parse_known_args()
    model = BenchModel(args.model_name, args.model_dir, args.nthread)
    model.load()
    kserve.ModelServer().start([model])
