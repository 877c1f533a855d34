"""A naive Flask model server: the one-file app users write before they reach for a serving
system, as a peer for `make bench` (and the only one for TensorFlow).

`POST /predict` with `{"instances": [...]}` answers `{"predictions": [...]}`: scikit-learn
`predict`, XGBoost `Booster.predict` on a DMatrix, or the SavedModel's `serving_default`
signature (its one input, its one output) on a float32 tensor. The model in BENCH_MODEL_DIR is
loaded when the module is imported, in each gunicorn worker. Run by the bench under gunicorn from
mlemu's environment, one worker per CPU with 8 threads each: its best layout on 2 CPUs (with the
2 x 32 mlemu's defaults choose it served less and less steadily: 1,777-2,401 requests/s for the
TensorFlow model at c=8 and 107-384 for RandomForest at c=64 in one run, bench/NOTES.md), so it is
measured at its best:

    gunicorn --workers 2 --threads 8 --chdir bench naive_flask:app
"""

import os
from pathlib import Path
from typing import Any

import numpy as np
from flask import Flask, jsonify, request

MODEL_DIR = Path(os.environ["BENCH_MODEL_DIR"])


def load(model_dir: Path) -> Any:
    if (model_dir / "saved_model.pb").exists():
        import tensorflow as tf

        signature = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
        (name,) = signature.structured_input_signature[1]
        (output,) = signature.structured_outputs

        def tf_predict(rows: Any) -> Any:
            return signature(**{name: tf.constant(np.asarray(rows, np.float32))})[output].numpy()

        return tf_predict
    if (model_dir / "model.bst").exists():
        import xgboost as xgb

        booster = xgb.Booster(model_file=str(model_dir / "model.bst"))
        return lambda rows: booster.predict(xgb.DMatrix(np.asarray(rows, np.float32)))
    import joblib

    model = joblib.load(model_dir / "model.joblib")
    return lambda rows: model.predict(np.asarray(rows))


predict = load(MODEL_DIR)
app = Flask(__name__)


@app.post("/predict")
def serve() -> Any:
    return jsonify(predictions=predict(request.get_json()["instances"]).tolist())
