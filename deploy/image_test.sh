#!/usr/bin/env bash
# `make image-test`: run a built image's own command and check health, readiness and predictions.
#
#   deploy/image_test.sh [IMAGE]        (default localhost/mlemu:latest)
#
# Without a Docker engine the image runs under `buildah run --isolation chroot`, which shares the
# host's network: the server listens on a free host port and is probed on 127.0.0.1. Demo models
# are trained inside the image by its own Python (scikit-learn's iris, an XGBoost booster and, when
# the image has TensorFlow, a SavedModel), so the check depends on nothing outside the image. Then:
#   1. the image's CMD with a bootstrap file: /healthz, /readyz, ml v1 :predict on every model;
#   2. the same CMD as a Vertex AI container (AIP_* variables): health route and predict route;
#   3. SIGTERM: the server exits within Cloud Run's 10 s grace.
set -euo pipefail

IMAGE=${1:-${IMAGE:-localhost/mlemu:latest}}
BUILDAH=${BUILDAH:-buildah --storage-driver vfs}
RUN="$BUILDAH run --isolation chroot"

for tool in buildah curl python3; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install -y $tool)" >&2; exit 1; }
done
$BUILDAH images --quiet "$IMAGE" >/dev/null 2>&1 || { echo "no image $IMAGE: run make image first" >&2; exit 1; }

ctr=$($BUILDAH from --pull=never --name "mlemu-image-test-$$" "$IMAGE")
server=""
log=$(mktemp /tmp/mlemu-image-test.XXXXXX)
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -KILL -- "-$server" 2>/dev/null || true; fi
    $BUILDAH rm "$ctr" >/dev/null
    rm -f "$log"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fail() { echo "FAIL: $*" >&2; echo "--- server log" >&2; tail -n 40 "$log" >&2; exit 1; }

# The image's command, as the image declares it (CMD, after any ENTRYPOINT).
mapfile -t cmd < <($BUILDAH inspect --type container "$ctr" | python3 -c '
import json, sys
config = json.load(sys.stdin)["OCIv1"]["config"]
for arg in (config.get("Entrypoint") or []) + (config.get("Cmd") or []):
    print(arg)')
[ ${#cmd[@]} -gt 0 ] || fail "the image declares no command"
echo "image $IMAGE, command: ${cmd[*]}"

echo "== training demo models inside the image"
$RUN --env TF_CPP_MIN_LOG_LEVEL=2 "$ctr" -- python - <<'EOF'
import importlib.util
import pathlib

import joblib
import numpy as np
import xgboost as xgb
import yaml
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

root = pathlib.Path("/var/lib/mlemu/demo-models")
x, y = load_iris(return_X_y=True)
(root / "iris").mkdir(parents=True, exist_ok=True)
joblib.dump(LogisticRegression(max_iter=1000).fit(x, y), root / "iris" / "model.joblib")
rng = np.random.default_rng(0)
features = rng.normal(size=(200, 3))
booster = xgb.train({"objective": "binary:logistic", "nthread": 1},
                    xgb.DMatrix(features, label=(features[:, 0] > 0).astype(int)), 5)
(root / "xgb").mkdir(exist_ok=True)
booster.save_model(root / "xgb" / "model.ubj")
(root / "xgb" / "model.ubj").rename(root / "xgb" / "model.bst")
models = {"iris": {"versions": {"v1": {"deploymentUri": str(root / "iris")}}},
          "xgb": {"versions": {"v1": {"deploymentUri": str(root / "xgb")}}}}
(root / "no_tf").mkdir(exist_ok=True)
(root / "no_tf" / "saved_model.pb").write_bytes(b"")  # a TENSORFLOW version for the slim image
if not importlib.util.find_spec("tensorflow"):
    models["no_tf"] = {"versions": {"v1": {"deploymentUri": str(root / "no_tf")}}}
else:
    import tensorflow as tf

    class HalfPlusThree(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")], autograph=False)
        def serve(self, x):
            return {"y": 0.5 * x + 3.0}

    module = HalfPlusThree()
    tf.saved_model.save(module, str(root / "half_plus_three"), signatures={"serving_default": module.serve})
    models["half_plus_three"] = {"versions": {"v1": {"deploymentUri": str(root / "half_plus_three")}}}
pathlib.Path("/var/lib/mlemu/bootstrap.yaml").write_text(yaml.safe_dump({"projects": {"demo": {"models": models}}}))
print("models:", ", ".join(models))
EOF
has_tf=$($RUN "$ctr" -- python -c 'import importlib.util; print(bool(importlib.util.find_spec("tensorflow")))')

start() {  # start the image's command with extra environment; sets $server and $url
    local port; port=$(free_port)
    setsid $RUN --env PORT="$port" --env MLEMU_GRPC_PORT=0 "$@" "$ctr" -- "${cmd[@]}" >"$log" 2>&1 &
    server=$!
    url="http://127.0.0.1:$port"
}
wait_for() {  # wait_for PATH: until it answers 200 (120 s at most)
    for _ in $(seq 1 240); do
        kill -0 "$server" 2>/dev/null || fail "the server exited"
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$url$1")" = 200 ] && return 0
        sleep 0.5
    done
    fail "$url$1 did not answer 200 within 120 s"
}
expect() {  # expect METHOD PATH BODY EXPECTED_JSON_SUBSTRING
    local out; out=$(curl -s -X "$1" "$url$2" -H 'Content-Type: application/json' ${3:+-d "$3"} -w ' HTTP %{http_code}')
    echo "$1 $2 -> $out"
    case "$out" in *"$4"*" HTTP 200") ;; *) fail "$2 answered $out, expected $4 and 200" ;; esac
}
stop() {  # SIGTERM, as Cloud Run sends it; the server must exit within its 10 s grace
    local t0; t0=$(date +%s%N)
    kill -TERM -- "-$server"
    for _ in $(seq 1 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$server" 2>/dev/null && fail "still running 10 s after SIGTERM"
    wait "$server" || true
    echo "SIGTERM: exited after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    server=""
}

echo "== serve (ml v1 and the other protocols) from the image's command"
start --env MLEMU_CONFIG=/var/lib/mlemu/bootstrap.yaml --env MLEMU_PROJECT=demo
wait_for /readyz
expect GET /healthz "" '"status":"ok"'
expect GET /readyz "" '"status":"ready"'
expect POST /v1/projects/demo/models/iris:predict '{"instances": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}' '{"predictions":[0,2]}'
expect POST /v1/projects/demo/models/xgb:predict '{"instances": [[2.0, 0.0, 0.0], [-2.0, null, 1.0]]}' '"predictions":['
# A large all-number body is decoded by simdjson (wirearray.py): pysimdjson works in the image.
big=$(python3 -c 'import json; print(json.dumps({"instances": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]] * 2000}))')
got=$(curl -s -X POST "$url/v1/projects/demo/models/iris:predict" -H 'Content-Type: application/json' -d "$big")
[ "$got" = "{\"predictions\":[$(python3 -c 'print(",".join(["0,2"] * 2000))')]}" ] \
    || fail "a 4,000-instance body answered ${got:0:200}"
echo "POST /v1/projects/demo/models/iris:predict, 4,000 instances (${#big} bytes) -> the 4,000 expected predictions"
if [ "$has_tf" != True ]; then  # without TensorFlow a TENSORFLOW version fails, saying why
    expect GET /v1/projects/demo/models/no_tf/versions/v1 "" 'TensorFlow is not installed'
fi
if [ "$has_tf" = True ]; then
    expect POST /v1/projects/demo/models/half_plus_three:predict '{"instances": [1.0, 2.0]}' '{"predictions":[3.5,4.0]}'
    expect POST /v1/models/half_plus_three:predict '{"instances": [4.0]}' '{"predictions":[5.0]}'
fi
stop

echo "== Vertex AI custom-container contract (AIP_* variables)"
aip_port=$(free_port)  # Vertex AI's port wins over PORT, which start() sets too
start --env AIP_HTTP_PORT="$aip_port" --env AIP_HEALTH_ROUTE=/health \
    --env AIP_PREDICT_ROUTE=/v1/endpoints/1/deployedModels/2:predict \
    --env AIP_STORAGE_URI=file:///var/lib/mlemu/demo-models/iris --env AIP_DEPLOYED_MODEL_ID=2
url="http://127.0.0.1:$aip_port"
wait_for /health
expect GET /health "" "{}"
expect POST /v1/endpoints/1/deployedModels/2:predict '{"instances": [[5.1, 3.5, 1.4, 0.2]], "parameters": {}}' '{"predictions":[0],"deployedModelId":"2"}'
stop

echo "PASS: $IMAGE"
