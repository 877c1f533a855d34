"""Demo custom prediction routine: scores with a scikit-learn model, then applies a threshold
given in the request (`{"instances": [...], "threshold": 0.7}`), default 0.5."""

import os
import pickle


class ThresholdPredictor:
    def __init__(self, model):
        self._model = model

    @classmethod
    def from_path(cls, model_dir):
        with open(os.path.join(model_dir, "model.pkl"), "rb") as f:
            return cls(pickle.load(f))

    def predict(self, instances, threshold=0.5, **kwargs):
        scores = self._model.predict_proba(instances)[:, 1]
        return [{"score": float(s), "label": int(s >= threshold)} for s in scores]
