"""Vertex AI's batch `instanceConfig`: how one input instance becomes the instance sent to the
model, and what the output line shows of it (no Beam here).

The rules are google/cloud/aiplatform/v1/batch_prediction_job.proto's
(BatchPredictionJob.InstanceConfig, googleapis/googleapis):

- `instanceType` `object` or `array` applies to `jsonl` only: with `object` each line must be an
  object; with `array` a line that is an object needs `includedFields` (their order is the
  array's), and a line that is already an array is sent as it is. Unset, a jsonl line is sent in
  its own form, and a csv row as an array in the order of its columns (or of `includedFields`).
- `keyField` names a field (a csv column) whose value is not sent to the model; the output line
  then holds it as `key` in place of `instance`.
- `includedFields` are the only fields sent; `excludedFields` are not sent (not both). Without a
  `keyField` the output line's `instance` is the input instance as read, so the excluded fields
  stay "attached to the batch prediction output".
- Fields apply to instances that are objects (jsonl lines; csv rows, named by the header, which
  the reader gives as objects for this, batch/vertex_inputs.py); an instance without a named
  field, or not an object where one is needed, is an error of that instance (one line of the
  errors file).

`problem` gives the create-time refusal of an invalid combination; `InstanceConfig.apply` the
per-instance transformation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

OBJECT, ARRAY = "object", "array"
FIELDS = ("instanceType", "keyField", "includedFields", "excludedFields")
#: Most field names a list may give (BigQuery's most columns a table may have): every
#: instance is looked up by them.
MAX_FIELDS = 10_000


def problem(config: dict[str, Any], instances_format: str) -> str:
    """Why `config` (the request's instanceConfig) cannot apply to `instances_format`; "" if it
    can. Each reason follows the proto's comment on the field."""
    kind = config.get("instanceType") or ""
    fields = [name for name in ("keyField", "includedFields", "excludedFields")
              if config.get(name)]
    if not isinstance(config.get("keyField") or "", str):
        return "instance_config.key_field must be a field name."
    if kind and kind not in (OBJECT, ARRAY):
        return (f'instance_config.instance_type "{kind}" is not supported. Supported values '
                'are: "object", "array".')
    if kind and instances_format != "jsonl":
        return (f'instance_config.instance_type "{kind}" does not apply to instances_format '
                f'"{instances_format}": it applies to "jsonl" (and "bigquery") input.')
    if config.get("includedFields") and config.get("excludedFields"):
        return ("instance_config.included_fields and instance_config.excluded_fields cannot "
                "both be set: when one is populated the other must be empty.")
    if fields and instances_format not in ("jsonl", "csv"):
        names = ", ".join(_snake(name) for name in fields)
        return (f'instance_config {names} cannot be used with instances_format '
                f'"{instances_format}": the input must be JSONL with objects at each line or CSV.')
    for name in ("includedFields", "excludedFields"):
        if not all(isinstance(f, str) and f for f in config.get(name) or []):
            return f"instance_config.{_snake(name)} must be a list of field names."
        if len(config.get(name) or []) > MAX_FIELDS:
            return f"instance_config.{_snake(name)} may name at most {MAX_FIELDS} fields."
    return ""


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """A job's instanceConfig, checked by `problem` at create time."""

    instance_type: str = ""
    key_field: str = ""
    included: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    #: The input is csv: its rows arrive as objects of the header's names (when a field is
    #: named) and are shown as the array of their values.
    csv: bool = False

    @classmethod
    def from_request(cls, config: dict[str, Any] | None, csv: bool) -> InstanceConfig:
        """From the request's instanceConfig (None: none); `csv`: the input is csv."""
        config = config or {}
        return cls(str(config.get("instanceType") or ""), str(config.get("keyField") or ""),
                   tuple(config.get("includedFields") or ()),
                   tuple(config.get("excludedFields") or ()), csv)

    @property
    def names_fields(self) -> bool:
        """Whether a field is named (a csv reader then gives rows as objects)."""
        return bool(self.key_field or self.included or self.excluded)

    def apply(self, instance: Any) -> tuple[Any, dict[str, Any]]:
        """(the instance sent to the model, the output line's `key` or `instance`); ValueError
        saying why this instance cannot be sent."""
        if not self.names_fields and not self.instance_type:
            return instance, {"instance": instance}
        if not isinstance(instance, dict):
            if self.names_fields or self.instance_type == OBJECT:
                raise ValueError(f"The instance must be a JSON object: instance_config "
                                 f"{self._what()} needs one.")
            return instance, {"instance": instance}  # an array sent as an array
        shown = {"instance": list(instance.values()) if self.csv else instance}
        if self.key_field:
            if self.key_field not in instance:
                raise ValueError(f'The instance has no key field "{self.key_field}".')
            shown = {"key": instance[self.key_field]}
        skip = {self.key_field, *self.excluded}
        names = self.included or [n for n in instance if n not in skip]
        missing = [n for n in names if n not in instance]
        if missing:
            raise ValueError(f"The instance has no field {', '.join(map(repr, missing))} that "
                             "instance_config.included_fields names.")
        names = [n for n in names if n != self.key_field]
        as_array = self.instance_type == ARRAY or (self.csv and not self.instance_type)
        if as_array and not self.included and not self.csv:
            raise ValueError("An instance that is a JSON object is sent as an array only in the "
                             "order instance_config.included_fields gives: set included_fields.")
        if as_array:
            return [instance[n] for n in names], shown
        return {n: instance[n] for n in names}, shown

    def _what(self) -> str:
        named = [name for name, value in (("key_field", self.key_field),
                                          ("included_fields", self.included),
                                          ("excluded_fields", self.excluded)) if value]
        return ", ".join(named) or f'instance_type "{self.instance_type}"'
