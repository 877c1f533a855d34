"""AI Explanations: feature attributions for a version's predictions (ml v1 `projects.explain`).

A version created with an `explanationConfig` (config.py) and an `explanation_metadata.json` in
its model directory (metadata.py) is explained per instance with its method: sampled Shapley over
the predictor's own batch predict (shapley.py; every framework, custom code included),
integrated gradients over a TensorFlow model's gradients (gradients.py), or XRAI: those
integrated gradients ranked over image regions (xrai.py, segments.py).

The response keeps the service's shape (gcloud's `ai-platform explain` tests and the Explainable AI
SDK's `attributions_by_label` parsing, GoogleCloudPlatform/explainable_ai_sdk
explainable_ai_sdk/common/attribution.py): per instance one entry for the explained label with
`attributions` keyed by the metadata's feature names, `example_score`, `baseline_score` (averaged
over baselines), `label_index` (-1 for a scalar output), `output_name`, `label_name` when the
output has an index_name_mapping, and `approx_error`: for integrated gradients
|sum(attributions) - (example_score - baseline_score)|, for sampled Shapley the sampling standard
error of the attributions (root of the summed per-feature variances of the mean; left out with
numPaths 1, where one sample cannot estimate it), both divided by |example_score - baseline_score|
when that is not ~0. This definition is mlemu's: the AI Platform
docs describe the field but not its formula.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from core.errors import Cancelled, InvalidArgument
from explainers import config, features, gradient_options, gradients, metadata, shapley, xrai
from explainers.config import Method
from predictors.base import Predictor

__all__ = ["Method", "check_deployable", "check_framework", "explain", "parse_config"]

check_framework = config.check_framework

#: Below this |example_score - baseline_score| the approximation error stays absolute.
TINY_DELTA = 1e-9
#: Model rows (or gradient points) one whole request may cost, all its instances together: the
#: bound on one instance alone let a 1.5 MB body of 157,284 small instances ask for minutes of
#: CPU. A request past it is refused before the model runs.
MAX_REQUEST_ROWS = shapley.MAX_ROWS
#: What an explanation whose caller has gone answers (nobody reads it; logs and metrics do).
GONE = "The client closed the connection; the explanation was stopped."


def parse_config(body: Any, where: str = "version.explanation_config") -> Method:
    return config.parse(body, where)


def check_deployable(explanation_config: Any, predictor: Predictor, model_dir: str,
                     any_framework: bool = True) -> None:
    """What versions.create checks once the model is loaded: the method suits the framework
    (`any_framework`: config.check_framework), the metadata file is there and fits the model's
    inputs and outputs."""
    method = config.parse(explanation_config)
    config.check_framework(method, predictor.framework, any_framework)
    features.layout(metadata.load(model_dir), predictor)


def _scores(predictions: Any, layout: features.Layout, label: int) -> np.ndarray:
    return np.array([layout.score(p, label) for p in predictions], dtype=np.float64)


class _Instance:
    """One instance being explained: its features, baselines and model calls."""

    def __init__(self, predictor: Predictor, layout: features.Layout, instance: Any,
                 parameters: dict[str, Any]) -> None:
        self.predictor, self.layout, self.instance = predictor, layout, instance
        self.parameters = parameters
        arrays = layout.arrays(instance)
        self.shapes = [a.shape for a in arrays]
        self.x = layout.flat(arrays)
        self.baselines = layout.baselines(arrays)

    def predict(self, vectors: np.ndarray) -> list[Any]:
        rows = self.layout.assemble(self.instance, self.shapes, vectors)
        return list(self.predictor.predict(rows, **self.parameters))

    def gradient(self, label: int, method: Method, rng: np.random.Generator) -> gradients.Gradient:
        """The gradient of the score of `label` (averaged over noisy samples with SmoothGrad)."""
        aliases = [f.key or "" for f in self.layout.features]

        def gradient(points: np.ndarray) -> np.ndarray:
            rows = self.layout.assemble(self.instance, self.shapes, points)
            grads = self.predictor.gradients(  # type: ignore[attr-defined]
                rows, self.layout.output_alias, label, aliases,
                self.parameters.get("signature_name"))
            return np.concatenate([np.asarray(grads[a], np.float64).reshape(len(points), -1)
                                   for a in aliases], axis=1)

        smooth = method.smooth_grad
        if smooth is None:
            return gradient
        names = [f.name for f in self.layout.features]
        return gradient_options.smoothed(
            gradient, gradient_options.sigmas(smooth, names, self.shapes), smooth.samples, rng)

    def image(self, method: Method) -> np.ndarray:
        """The one image input [height, width(, channels)] XRAI and a blurred baseline need."""
        if len(self.shapes) != 1 or len(self.shapes[0]) not in (2, 3):
            what = ("xraiAttribution" if method.name == config.XRAI else
                    f"{method.name}.blurBaselineConfig")
            raise InvalidArgument(f"{what} explains one image input, [height, width] or "
                                  "[height, width, channels] per instance; this model's explained "
                                  f"inputs have shapes {[list(s) for s in self.shapes]}.")
        return self.x.reshape(self.shapes[0]).astype(np.float64)


def _check(baseline: np.ndarray, stop: Callable[[], bool] | None) -> np.ndarray:
    """`baseline`, once `stop` says the caller is still there."""
    if stop is not None and stop():
        raise Cancelled(GONE)
    return baseline


def _cost(item: _Instance, method: Method) -> int:
    """Model rows (gradient points) explaining `item` costs: one call for the instance and its
    baselines, then per baseline numPaths x (features + 1) rows, or numIntegralSteps points."""
    per_baseline = method.count * (item.x.size + 1 if method.name == config.SAMPLED_SHAPLEY else 1)
    if method.smooth_grad is not None:
        per_baseline *= method.smooth_grad.samples
    return 1 + len(item.baselines) * (1 + per_baseline)


def _explain_one(item: _Instance, method: Method, meta: metadata.Metadata,
                 rng: np.random.Generator, stop: Callable[[], bool] | None) -> dict[str, Any]:
    layout = item.layout
    first = item.predict(np.stack([item.x, *item.baselines]))
    label = layout.label(first[0])
    example_score = layout.score(first[0], label)
    baseline_score = float(np.mean(_scores(first[1:], layout, label)))
    delta = example_score - baseline_score
    if method.name == config.SAMPLED_SHAPLEY:
        rows = method.count * (item.x.size + 1) * len(item.baselines)
        if rows > shapley.MAX_ROWS:
            raise InvalidArgument(f"Sampled Shapley would need {rows} model evaluations per "
                                  f"instance (numPaths x (features + 1)); mlemu allows "
                                  f"{shapley.MAX_ROWS}. Use fewer paths or features.")
        runs = [shapley.sampled_shapley(lambda v: _scores(item.predict(v), layout, label),
                                        item.x, _check(base, stop), method.count, rng)
                for base in item.baselines]
        attributions = np.mean([a for a, _ in runs], axis=0)
        spreads = [se for _, se in runs if se is not None]
        error = float(np.sqrt(np.sum(np.square(spreads))) / len(runs)) if spreads else None
    else:
        if item.x.dtype.kind not in "f":
            raise InvalidArgument("Integrated gradients needs numeric inputs; explain inputs of "
                                  "other types with sampledShapleyAttribution.")
        attributions = np.mean([gradients.integrated_gradients(
            item.gradient(label, method, rng), item.x, _check(base, stop), method.count)
            for base in item.baselines], axis=0)
        error = abs(float(np.sum(attributions)) - delta)  # of the gradients XRAI ranks too
        if method.name == config.XRAI:
            attributions = _xrai(item, attributions)
    if error is not None and abs(delta) > TINY_DELTA:
        error /= abs(delta)
    entry: dict[str, Any] = {} if error is None else {"approx_error": error}
    entry.update({
        "attributions": layout.split(np.asarray(attributions, np.float64), item.shapes),
        "baseline_score": baseline_score,
        "example_score": example_score,
        "label_index": label,
        "output_name": meta.output.name,
    })
    names = meta.output.index_name_mapping
    if 0 <= label < len(names):
        entry["label_name"] = names[label]
    return entry


def _xrai(item: _Instance, attributions: np.ndarray) -> np.ndarray:
    """XRAI's region map of the one image input (explainers/xrai.py), flat like the input."""
    image = item.image(Method(config.XRAI, 1))
    return xrai.xrai(image, np.asarray(attributions, np.float64).reshape(image.shape)).reshape(-1)


def explain(predictor: Predictor, explanation_config: Any, model_dir: str | None,
            instances: list[Any], parameters: dict[str, Any], seed: int = shapley.DEFAULT_SEED,
            meta: metadata.Metadata | None = None,
            stop: Callable[[], bool] | None = None,
            any_framework: bool = True) -> list[dict[str, Any]]:
    """One `{"attributions_by_label": [...]}` per instance, by the method of
    `explanation_config` (an ml v1 explanationConfig, or a parsed Method: Vertex AI's,
    explainers/vertex_spec.py, with its SmoothGrad and blurred baseline). The metadata is
    `meta` when given (Vertex AI's explanationSpec carries it inline), else the model
    directory's file. The
    request's whole cost is checked before the model runs (MAX_REQUEST_ROWS); `stop` is asked
    before each instance and baseline whether the caller is gone (then Cancelled: the work ends
    with the instance in hand). `any_framework`: whether models other than TensorFlow may be
    explained (config.check_framework; ml v1 passes MLEMU_EXPLAIN_ANY_FRAMEWORK)."""
    method = (explanation_config if isinstance(explanation_config, Method)
              else config.parse(explanation_config))
    config.check_framework(method, predictor.framework, any_framework)
    if meta is None:
        meta = metadata.load(model_dir or "")
    layout = features.layout(meta, predictor, parameters.get("signature_name"))
    items, total = [], 0
    for instance in instances:
        items.append(_Instance(predictor, layout, instance, parameters))
        if method.blur_sigma > 0:  # the path starts at the blurred image instead
            image = items[-1].image(method)
            items[-1].baselines = [gradient_options.blurred(image, method.blur_sigma).reshape(-1)]
        total += _cost(items[-1], method)
        if total > MAX_REQUEST_ROWS:
            raise InvalidArgument(
                f"Explaining these {len(instances)} instances would need more than "
                f"{MAX_REQUEST_ROWS} model evaluations, the most mlemu allows per request "
                "(each instance costs its baselines x numPaths x (features + 1), or x "
                "numIntegralSteps). Send fewer instances per request.")
    rng = np.random.default_rng(seed)
    explained = []
    for item in items:
        if stop is not None and stop():
            raise Cancelled(GONE)
        explained.append({"attributions_by_label": [_explain_one(item, method, meta, rng, stop)]})
    return explained
