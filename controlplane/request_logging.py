"""A version's `requestLoggingConfig`, checked as the ml v1 API defines it (versions.create and
versions.patch; observability/request_log.py acts on it).

From the ml v1 reference (discovery document, GoogleCloudMlV1__RequestLoggingConfig):
`samplingPercentage` is a double, "a fraction from 0 to 1" (default 0); `bigqueryTableName` is
"Required. Fully qualified BigQuery table name in the following format:
project_id.dataset_name.table_name"; no other field exists. BigQuery's naming rules bound the
parts (https://cloud.google.com/bigquery/docs/datasets#dataset-naming: letters, digits and
underscores, up to 1,024 characters; https://cloud.google.com/bigquery/docs/tables#table_naming:
up to 1,024 characters; project ids 6-30 characters, https://cloud.google.com/resource-manager/
docs/creating-managing-projects), so a name is at most about 2 KB, never a megabyte.
"""

from __future__ import annotations

import math
import re
from typing import Any

from controlplane.common import field_error, require_object
from core.errors import InvalidArgument

SCHEMA = "GoogleCloudMlV1__RequestLoggingConfig"
FIELD = "version.request_logging_config"
#: project (optionally domain-scoped: example.com:project) . dataset . table
TABLE_NAME = re.compile(r"(?:[a-z][a-z0-9.-]{0,61}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]"
                        r"\.[A-Za-z0-9_]{1,1024}\.[\w$ -]{1,1024}")


def check_logging_config(config: Any) -> dict[str, Any] | None:
    """The config to store (None or {} turn logging off); INVALID_ARGUMENT naming the field
    otherwise."""
    if config is None or config == {}:
        return None
    config = require_object(config, SCHEMA, FIELD)
    rate = config.get("samplingPercentage", 0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise InvalidArgument(f"Invalid value at '{FIELD}.sampling_percentage' (TYPE_DOUBLE), "
                              f"{str(rate)[:100]!r}")
    if not math.isfinite(rate) or not 0 <= rate <= 1:
        raise field_error(InvalidArgument, f"{FIELD}.sampling_percentage",
                          "samplingPercentage must be a fraction from 0 to 1.")
    table = config.get("bigqueryTableName")
    if not isinstance(table, str) or not table:
        raise field_error(InvalidArgument, f"{FIELD}.bigquery_table_name",
                          "bigqueryTableName is required.")
    if not TABLE_NAME.fullmatch(table):
        raise field_error(InvalidArgument, f"{FIELD}.bigquery_table_name",
                          f"bigqueryTableName {table[:100]!r} is not a fully qualified BigQuery "
                          "table name (project_id.dataset_name.table_name).")
    return {"samplingPercentage": rate, "bigqueryTableName": table}
