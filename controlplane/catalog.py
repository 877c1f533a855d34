"""What AI Platform Prediction offered: its regions, runtime versions and the machine types batch
prediction ran on; requests naming anything else are refused as the service refused them.

Sources (Google's AI Platform Prediction guides):
- regions: https://cloud.google.com/ai-platform/prediction/docs/regions ("Available regions");
- runtime versions: https://cloud.google.com/ai-platform/prediction/docs/runtime-version-list
  (`major.minor`; 1.0 to 1.15 and 2.1 to 2.11 were released);
- batch prediction: https://cloud.google.com/ai-platform/prediction/docs/regional-endpoints
  ("Regional endpoints only support Compute Engine (N1) machine types ... Models deployed to
  regional endpoints do not support batch prediction") and .../docs/machine-types-online-
  prediction: the legacy MLS1 machine types serve the global endpoint, which batch prediction
  jobs read models from.
"""

from __future__ import annotations

from controlplane.common import field_error
from core.errors import InvalidArgument
from registry.resources import Version

REGIONS = frozenset({
    "us-west1", "us-west2", "us-west3", "us-central1", "us-east1", "us-east4",
    "northamerica-northeast1", "southamerica-east1",
    "europe-west1", "europe-west2", "europe-west3", "europe-west4", "europe-west6",
    "europe-north1",
    "asia-south1", "asia-southeast1", "asia-east1", "asia-east2", "asia-northeast1",
    "asia-northeast2", "asia-northeast3", "australia-southeast1",
})
RUNTIME_VERSIONS = frozenset([f"1.{minor}" for minor in range(16)]
                             + [f"2.{minor}" for minor in range(1, 12)])
#: The legacy machine types of the global endpoint; a version without a machineType has the
#: global endpoint's default, mls1-c1-m2.
BATCH_MACHINE_TYPES = frozenset({"mls1-c1-m2", "mls1-c4-m2"})


def check_region(region: object, field: str) -> None:
    if region not in REGIONS:
        raise field_error(InvalidArgument, field,
                          f"Region {region!r} is not one of AI Platform Prediction's regions: "
                          f"{', '.join(sorted(REGIONS))}.")


def check_runtime_version(runtime_version: object, field: str) -> None:
    """An empty runtimeVersion takes the service's default; anything else must be listed."""
    if runtime_version in (None, ""):
        return
    if runtime_version not in RUNTIME_VERSIONS:
        listed = sorted(RUNTIME_VERSIONS, key=lambda v: tuple(map(int, v.split("."))))
        raise field_error(InvalidArgument, field,
                          f"Runtime version {runtime_version!r} is not supported; use one of "
                          f"{', '.join(listed)}.")


def check_batch_machine_type(version: Version, field: str) -> None:
    """Batch prediction ran models of the global endpoint's legacy (MLS1) machine types."""
    machine = version.machine_type
    if machine and machine not in BATCH_MACHINE_TYPES:
        raise field_error(InvalidArgument, field,
                          f"Version {version.name.rsplit('/', 1)[-1]} uses machine type "
                          f"{machine}, which batch prediction does not support: batch "
                          f"prediction runs versions of legacy (MLS1) machine types "
                          f"({', '.join(sorted(BATCH_MACHINE_TYPES))}) only.")
