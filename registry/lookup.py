"""Resolving what a prediction request names to the READY version that serves it."""

from __future__ import annotations

from core.errors import FailedPrecondition, ModelNotFound, field_violation
from core.payloads import ModelRef
from registry.resources import Model, Version
from registry.store_base import Store


def model_not_found(model: str) -> ModelNotFound:
    description = (
        f'The model resource: "{model}" was not found. Please create the model resource first '
        f"by using 'gcloud ai-platform models create {model}'."
    )
    return ModelNotFound(f"Field: name Error: {description}", model=model,
                         details=field_violation("name", description))


def version_not_found(name: str) -> ModelNotFound:
    description = f"The specified model version was not found: {name}."
    model, _, version = name.rpartition("/versions/")
    return ModelNotFound(f"Field: name Error: {description}", model=model.rsplit("/", 1)[-1],
                         version=version, details=field_violation("name", description))


def get_model(store: Store, ref: ModelRef) -> Model:
    model = store.get_model(ref.model_name)
    if model is None:
        raise model_not_found(ref.model)
    return model


def serving_version(store: Store, ref: ModelRef) -> Version:
    """The version a predict call runs: the named one, or the model's default; READY only.

    The result is shared between requests: callers must not modify it. Results are cached on
    the store (Store.memo: {ref: version} under the change token). Every request still asks
    the store whether anything changed (Store.change_token: for SQLite a word of memory every
    process shares, registry/change_signal.py), so a version deleted or changed by any worker
    stops being served at once, as with a full read; only unchanged reads are saved.
    """
    memo: dict[ModelRef, Version] | None = store.memo("serving")
    if memo is None:
        return _serving_version(store, ref)
    version = memo.get(ref)
    if version is None:
        version = memo[ref] = _serving_version(store, ref)  # errors are never cached
    return version


def _serving_version(store: Store, ref: ModelRef) -> Version:
    model = get_model(store, ref)
    if ref.version is not None:
        version = store.get_version(ref.resource_name)
        if version is None:
            raise version_not_found(ref.resource_name)
    else:
        if not model.default_version:
            description = _no_default_version(store, ref)
            raise FailedPrecondition(
                f"Field: name Error: {description}", details=field_violation("name", description)
            )
        name = f"{ref.model_name}/versions/{model.default_version}"
        version = store.get_version(name)
        if version is None:
            raise version_not_found(name)
    # UPDATING only ever follows READY (versions.patch refuses anything else) and changes
    # metadata, not the model, so the version keeps serving meanwhile.
    if version.state not in ("READY", "UPDATING"):
        detail = f": {version.error_message}" if version.error_message else "."
        raise FailedPrecondition(
            f"Version {version.name} is not ready for prediction; its state is {version.state}"
            + detail
        )
    return version


def _no_default_version(store: Store, ref: ModelRef) -> str:
    """Why a model has no default version. While its first version is still being created the
    caller did nothing wrong and needs only to wait: say so, and name that version."""
    creating = [v.name.rsplit("/", 1)[-1] for v in store.list_versions(ref.model_name)
                if v.state == "CREATING"]
    if creating:
        return (f"The model {ref.model_name} has no default version yet: version "
                f"{', '.join(creating)} is being created (state CREATING). It becomes the default "
                "when it is READY; wait for its operation to be done, then predict again.")
    return (f"The model {ref.model_name} has no default version. Create a version or name one "
            "in the request.")
