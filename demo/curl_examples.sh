#!/usr/bin/env bash
# The README's and docs/'s curl examples against `make serve` (127.0.0.1:8080 unless MLEMU_URL is set).
set -eu
URL=${MLEMU_URL:-http://127.0.0.1:8080}
set -x
curl -sS -X POST "$URL/v1/projects/demo/models/iris:predict" \
  -H 'Content-Type: application/json' -d '{"instances": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}'
curl -sS -X POST "$URL/v1/projects/demo/models/iris/versions/v2:predict" \
  -H 'Content-Type: application/json' -d '{"instances": [[5.1, 3.5, 1.4, 0.2]]}'
curl -sS -X POST "$URL/v1/projects/demo/models/census_xgb:predict" \
  -H 'Content-Type: application/json' -d '{"instances": [[0.0, 1.1, NaN], [1.5, null, -0.3]]}'
curl -sS -X POST "$URL/v1/projects/demo/models/threshold:predict" \
  -H 'Content-Type: application/json' -d '{"instances": [[5.1, 3.5, 1.4, 0.2]], "threshold": 0.7}'
# TensorFlow Serving REST API (models of project `demo`: make serve sets MLEMU_PROJECT=demo)
curl -sS "$URL/v1/models/half_plus_three"
curl -sS "$URL/v1/models/half_plus_three/metadata"
curl -sS -d '{"instances": [1.0, 2.0, 5.0]}' -X POST "$URL/v1/models/half_plus_three:predict"
curl -sS -d '{"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 2.0}]}' -X POST "$URL/v1/models/half_plus_three:regress"
curl -sS -d '{"inputs": {"x": [1.0, 2.0]}}' -X POST "$URL/v1/models/half_plus_three/labels/stable:predict"
curl -sS -d '{"instances": [[5.1, 3.5, 1.4, 0.2]]}' -X POST "$URL/v1/models/iris/versions/2:predict"
curl -sS -X POST "$URL/v1/projects/demo/models/half_plus_three:predict" \
  -H 'Content-Type: application/json' -d '{"instances": [1.0, 2.0, 5.0]}'
# Open Inference Protocol V2 and grps (`make serve` sets MLEMU_PROJECT=demo: they name no project)
curl -sS -X POST "$URL/v2/models/iris/infer" \
  -H 'Content-Type: application/json' -d '{"id": "1", "inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP64", "data": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}]}'
curl -sS -X POST "$URL/grps/v1/infer/predict?model=iris-v2" \
  -H 'Content-Type: application/json' -d '{"gtensors": {"tensors": [{"name": "x", "dtype": "DT_FLOAT64", "shape": [1, 4], "flat_float64": [5.1, 3.5, 1.4, 0.2]}]}}'
