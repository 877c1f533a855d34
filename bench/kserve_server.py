"""KServe's Python model server over the benchmark's models: the minimal `kserve.Model` subclass
its users write (load in `load`, numpy in `predict`, KServe V1 `{"predictions": [...]}` out), as in
KServe's own sklearnserver/xgbserver. Runs inside bench/.venvs/kserve, not mlemu's environment.

Usage: python kserve_server.py --model_dir DIR [--model_dir DIR ...] --http_port P --workers N
Each model is served as /v1/models/<directory name>:predict.
"""

import argparse
import os

import joblib
import kserve
import numpy as np


class BenchModel(kserve.Model):
    def __init__(self, name: str, model_dir: str) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.load()

    def load(self) -> bool:
        bst = os.path.join(self.model_dir, "model.bst")
        if os.path.exists(bst):
            import xgboost as xgb

            self._booster = xgb.Booster(model_file=bst)
            self._model = None
        else:
            self._model = joblib.load(os.path.join(self.model_dir, "model.joblib"))
        self.ready = True
        return self.ready

    def predict(self, payload, headers=None):
        instances = np.asarray(payload["instances"])
        if self._model is not None:
            result = self._model.predict(instances)
        else:
            import xgboost as xgb

            result = self._booster.predict(xgb.DMatrix(instances.astype(np.float32)))
        return {"predictions": result.tolist()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
    parser.add_argument("--model_dir", action="append", required=True)
    args, _ = parser.parse_known_args()
    models = [BenchModel(os.path.basename(os.path.normpath(d)), d) for d in args.model_dir]
    kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=args.workers,
                       enable_grpc=False).start(models)
