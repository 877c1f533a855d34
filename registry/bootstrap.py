"""Declarative bootstrap: a YAML file of projects -> models -> versions applied to the store.

Applying is idempotent and runs in one transaction, so every gunicorn worker may apply the same
file at start: the first creates what is missing, the rest find it there. A version whose spec
(deploymentUri, framework, predictionClass, packageUris, explanationConfig) changed in the file is
replaced; models and versions that are not in the file (created through the API) are left alone.
Relative paths are relative to the file; gs:// URIs are checked by warm-up, which downloads them.
The format is documented in docs/management.md ("Bootstrap file").

    projects:
      my-project:
        models:
          iris:
            description: Iris classifier
            defaultVersion: v2            # optional; else the version marked default, else the first
            versions:
              v1: {deploymentUri: models/iris_v1, framework: SCIKIT_LEARN}
              v2: {deploymentUri: models/iris_v2}
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import yaml

# libyaml's safe loader where PyYAML was built with it (its wheels are): the same documents and
# errors as the pure-Python SafeLoader, parsed about five times faster, which a bootstrap file of
# a thousand versions, read by the master and by every worker at start, pays for.
try:
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader  # type: ignore[assignment]

import predictors
from core.errors import ApiError
from registry import artifacts, names
from registry.resources import Model, Version, new_etag, now_rfc3339
from registry.store import Store

#: Version keys that decide what is served; a change replaces the version.
SPEC_KEYS = ("deployment_uri", "framework", "prediction_class", "package_uris", "explanation_config")
MODEL_KEYS = {"description", "labels", "regions", "defaultVersion", "versions", "serving",
              "onlinePredictionLogging", "onlinePredictionConsoleLogging"}
VERSION_KEYS = {"deploymentUri", "framework", "predictionClass", "packageUris", "description",
                "labels", "runtimeVersion", "pythonVersion", "machineType", "explanationConfig",
                "default", "serving", "requestLoggingConfig"}


class BootstrapError(ValueError):
    """The bootstrap file is malformed (message names the file and the offending entry)."""


def load_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(Path(path).read_text(), Loader=SafeLoader) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise BootstrapError(f"Cannot read bootstrap file {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("projects", {}), dict):
        raise BootstrapError(f"{path}: top level must be a mapping with a 'projects' mapping.")
    return data


def _check_keys(where: str, body: Any, allowed: set[str]) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise BootstrapError(f"{where}: expected a mapping, got {type(body).__name__}.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BootstrapError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(sorted(allowed))}.")
    return body


def _validate(version: Version) -> None:
    """Cheap checks that need no framework import: the directory and its one model file.

    gs:// artifacts are not cheap to check (every worker would download them here): the version
    is declared READY and warm-up, which downloads and loads it, marks it FAILED if that fails.
    """
    if any(artifacts.is_remote(u) for u in (version.deployment_uri, *version.package_uris)):
        version.state, version.error_message = "READY", ""
        return
    try:
        model_dir = artifacts.resolve_uri(version.deployment_uri)
        if version.prediction_class:
            if not os.path.isdir(model_dir):
                raise predictors.ModelLoadError(f"Model directory {model_dir} does not exist.")
            for uri in version.package_uris:
                if not os.path.exists(artifacts.resolve_uri(uri)):
                    raise predictors.ModelLoadError(f"Package {uri} does not exist.")
        else:
            _, implied = predictors.find_model_file(model_dir, version.framework or None)
            if not version.framework and implied:
                version.framework = implied
        version.state, version.error_message = "READY", ""
    except ApiError as exc:
        version.state, version.error_message = "FAILED", exc.message


def _version_from(name: str, body: dict[str, Any], base: Path) -> Version:
    version = Version.from_json({k: v for k, v in body.items()
                                 if k not in {"default", "serving"}}, name)
    version.deployment_uri = artifacts.resolve_uri(version.deployment_uri, str(base)) \
        if version.deployment_uri and "://" not in version.deployment_uri else version.deployment_uri
    version.package_uris = [
        artifacts.resolve_uri(u, str(base)) if "://" not in u else u for u in version.package_uris
    ]
    version.serving = dict(body.get("serving") or {})
    return version


def apply(store: Store, path: Path) -> list[str]:
    """Apply the bootstrap file at `path`; returns the version names it declares."""
    return apply_data(store, load_file(path), Path(path).resolve().parent, str(path))


def declared(path: Path) -> list[str]:
    """The version names the bootstrap file at `path` declares, without touching a store."""
    names_: list[str] = []
    for project, pbody in (load_file(path).get("projects") or {}).items():
        for model_id, mbody in ((pbody or {}).get("models") or {}).items():
            for version_id in ((mbody or {}).get("versions") or {}):
                names_.append(names.version_name(str(project), str(model_id), str(version_id)))
    return names_


def apply_data(store: Store, data: dict[str, Any], base: Path, path: str) -> list[str]:
    """Apply bootstrap `data` (the file format, already parsed; relative paths are taken from
    `base`, errors name `path`); returns the version names it declares."""
    declared: list[str] = []
    with store.transaction():
        for project, pbody in (data.get("projects") or {}).items():
            pbody = _check_keys(f"{path}: projects.{project}", pbody, {"models"})
            for model_id, mbody in (pbody.get("models") or {}).items():
                where = f"{path}: projects.{project}.models.{model_id}"
                mbody = _check_keys(where, mbody, MODEL_KEYS)
                try:
                    names.check_id(str(model_id), "model.name", "Model")
                except ApiError as exc:
                    raise BootstrapError(f"{where}: {exc.message}") from None
                declared += _apply_model(store, str(project), str(model_id), mbody, base, where)
    return declared


def _apply_model(store: Store, project: str, model_id: str, mbody: dict[str, Any],
                 base: Path, where: str) -> list[str]:
    name = names.model_name(project, model_id)
    model = store.get_model(name)
    fields = {k: v for k, v in mbody.items() if k not in {"versions", "defaultVersion", "serving"}}
    stored = None if model is None else dataclasses.replace(model)  # written again only if changed
    if model is None:
        model = Model.from_json(fields, name)
        model.create_time = now_rfc3339()
    else:
        updated = Model.from_json(fields, name)
        model.description, model.labels = updated.description, updated.labels
    model.serving = dict(mbody.get("serving") or {})
    declared: list[str] = []
    marked_default: str | None = None
    for version_id, vbody in (mbody.get("versions") or {}).items():
        vwhere = f"{where}.versions.{version_id}"
        vbody = _check_keys(vwhere, vbody, VERSION_KEYS)
        try:
            names.check_id(str(version_id), "version.name", "Version")
        except ApiError as exc:
            raise BootstrapError(f"{vwhere}: {exc.message}") from None
        if not vbody.get("deploymentUri"):
            raise BootstrapError(f"{vwhere}: deploymentUri is required.")
        if vbody.get("explanationConfig") is not None:
            # Imported here: gunicorn's master imports this module before it makes BLAS single-
            # threaded, and explainers imports numpy (deploy/gunicorn.conf.py).
            from explainers import config as explanation_config

            try:
                explanation_config.parse(vbody["explanationConfig"], "explanationConfig")
            except ApiError as exc:
                raise BootstrapError(f"{vwhere}: {exc.message}") from None
        vname = names.version_name(project, model_id, str(version_id))
        wanted = _version_from(vname, vbody, base)
        existing = store.get_version(vname)
        if existing is not None and all(
            getattr(existing, k) == getattr(wanted, k) or (k == "framework" and not wanted.framework)
            for k in SPEC_KEYS
        ):
            kept = (wanted.description, wanted.labels, wanted.serving)
            if (existing.description, existing.labels, existing.serving) != kept:
                existing.description, existing.labels, existing.serving = kept
                store.put_version(existing)
        else:
            _validate(wanted)
            wanted.create_time = now_rfc3339()
            wanted.etag = new_etag(vname)
            store.put_version(wanted)
        declared.append(vname)
        if vbody.get("default"):
            marked_default = str(version_id)
    default = mbody.get("defaultVersion") or marked_default
    if default is not None:
        if names.version_name(project, model_id, str(default)) not in declared and \
                store.get_version(names.version_name(project, model_id, str(default))) is None:
            raise BootstrapError(f"{where}: defaultVersion {default!r} is not one of its versions.")
        model.default_version = str(default)
    elif not model.default_version and declared:
        model.default_version = names.short(declared[0])  # the first version becomes the default
    if model != stored:  # a restart (or the next worker) on an unchanged file writes nothing
        model.etag = new_etag(name)
        store.put_model(model)
    return declared


def frameworks(path: Path | None) -> set[str]:
    """The built-in frameworks the file's versions use (for preloading; never raises).

    A version without `framework` is detected from its local model file; a joblib/pickle file
    counts as SCIKIT_LEARN (an XGBoost pickle needs scikit-learn's loader too).
    """
    found: set[str] = set()
    if path is None:
        return found
    try:
        data = load_file(path)
        base = Path(path).resolve().parent
        for pbody in (data.get("projects") or {}).values():
            for mbody in ((pbody or {}).get("models") or {}).values():
                for vbody in ((mbody or {}).get("versions") or {}).values():
                    if not isinstance(vbody, dict) or vbody.get("predictionClass"):
                        continue
                    if vbody.get("framework"):
                        found.add(str(vbody["framework"]).upper())
                        continue
                    uri = str(vbody.get("deploymentUri") or "")
                    if uri and "://" not in uri:
                        _, implied = predictors.find_model_file(artifacts.resolve_uri(uri, str(base)))
                        found.add(implied or predictors.SCIKIT_LEARN)
    except (BootstrapError, ApiError, OSError, AttributeError, TypeError):
        pass  # the workers' own load reports what is wrong with the file
    return found
