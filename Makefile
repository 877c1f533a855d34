# The commands of the README and docs/. Everything installs into .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8080

.PHONY: serve test lint bench bench-quick bench-deps image image-test clean venv demo protos system-deps soak \
	wheel

GENERATED := protocols/_generated/__init__.py

venv: $(VENV)/.installed $(GENERATED)

# The pinned requirements, then mlemu itself, editable (pyproject.toml, setup.py): .venv/bin/mlemu
# runs this checkout's code. No build isolation: the build uses the pinned setuptools and
# grpcio-tools just installed (and compiles protocols/_generated, as `make protos`).
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-tf.txt requirements-beam.txt \
		pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -r requirements-tf.txt -r requirements-beam.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	touch $@

# gRPC/protobuf modules from protos/*.proto (grpcio-tools), into the gitignored protocols/_generated.
protos: $(GENERATED)

$(GENERATED): protos/grpc_predict_v2.proto protos/grps.proto protocols/protos.py $(VENV)/.installed
	$(PY) -m protocols.protos

# mlemu as a wheel in dist/ (what a remote Beam runner's workers install: docs/install.md).
wheel: venv
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w dist .

demo: venv
	$(PY) demo/make_models.py

serve: demo
	@echo "Serving the demo models on http://127.0.0.1:$(PORT). Try:"
	@sed -n 's/^curl/  curl/p; /^  -H/p' demo/curl_examples.sh | sed 's/\$$URL/http:\/\/127.0.0.1:$(PORT)/'
	@echo "Manage them from another terminal: ./mlemu models list --url http://127.0.0.1:$(PORT)"
	MLEMU_PROJECT=demo MLEMU_EXPLAIN_ANY_FRAMEWORK=true $(VENV)/bin/mlemu serve --config demo/bootstrap.yaml --port $(PORT)

test: venv system-deps
	$(PY) -m pytest

# Debian packages the tests use, installed when missing (a fresh machine needs nothing by hand).
# One line each, `package:probe`: the package is installed when no file matches the probe.
SYSTEM_DEPS += postgresql:/usr/lib/postgresql/*/bin/pg_ctl
SYSTEM_DEPS += prometheus:/usr/bin/prometheus
# The console's browser tests (tests/console/): headless Chromium and its WebDriver.
SYSTEM_DEPS += chromium:/usr/bin/chromium
SYSTEM_DEPS += chromium-driver:/usr/bin/chromedriver
APT_GET ?= $(if $(filter 0,$(shell id -u)),,sudo) apt-get

system-deps:
	@missing=""; for dep in $(SYSTEM_DEPS); do \
	  ls $${dep#*:} >/dev/null 2>&1 || missing="$$missing $${dep%%:*}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  $(APT_GET) update -q && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -q --no-install-recommends $$missing; \
	fi

# Benchmark (docs/performance.md): peers in their own virtualenvs, wrk and h2load from Debian.
BENCH_VENVS := bench/.venvs
# The load generators join system-deps' list for this target (and its prerequisites) only.
bench-deps: SYSTEM_DEPS += wrk:/usr/bin/wrk nghttp2-client:/usr/bin/h2load
bench-deps: venv system-deps $(BENCH_VENVS)/mlserver/.installed $(BENCH_VENVS)/kserve/.installed

$(BENCH_VENVS)/%/.installed: bench/requirements-%.txt
	test -x $(BENCH_VENVS)/$*/bin/python || $(PYTHON) -m venv $(BENCH_VENVS)/$*
	$(BENCH_VENVS)/$*/bin/python -m pip install --quiet -r $<
	touch $@

bench: bench-deps
	$(PY) -m bench

bench-quick: bench-deps
	$(PY) -m bench --quick

# A bounded mixed soak of a real server (tools/soak.py; not part of `make test`): every protocol,
# management writes, one worker killed half-way. SOAK_SECONDS sets its length.
SOAK_SECONDS ?= 60
soak: venv
	$(PY) tools/soak.py --seconds $(SOAK_SECONDS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/hadolint deploy/Dockerfile

# Container image, built without a Docker engine (buildah, chroot isolation, vfs storage; see
# deploy/build_image.sh). WITH_TENSORFLOW=false builds the small scikit-learn/XGBoost image
# (localhost/mlemu:slim) instead of localhost/mlemu:latest. Neither target is part of `make test`.
WITH_TENSORFLOW ?= true
IMAGE ?= localhost/mlemu:$(if $(filter false,$(WITH_TENSORFLOW)),slim,latest)

image:
	WITH_TENSORFLOW=$(WITH_TENSORFLOW) IMAGE=$(IMAGE) bash deploy/build_image.sh

image-test:
	bash deploy/image_test.sh $(IMAGE)

clean:
	rm -rf mlemu-state demo/models .pytest_cache .mypy_cache .ruff_cache protocols/_generated build dist \
		mlemu.egg-info
