"""An endpoint's traffic split: the rules deployModel, undeployModel and mutate apply to it, and
the choice of a deployed model for one request.

Rules from google/cloud/aiplatform/v1/endpoint_service.proto (DeployModelRequest.traffic_split:
"the key for the model being deployed is "0"... the traffic percentage values must add up to 100,
or map must be empty if the Endpoint is to not accept any traffic"), and the service's
behaviour the SDK relies on (google-cloud-aiplatform, aiplatform/models.py `_allocate_traffic`,
`_unallocate_traffic`): a first model deployed without a split takes 100 %; undeploying a model
that still receives traffic is refused unless the request gives the split that remains.
"""

from __future__ import annotations

import bisect
import itertools
import random

from core.errors import FailedPrecondition, InvalidArgument

DEPLOYING_KEY = "0"


def _check_values(split: dict[str, int]) -> dict[str, int]:
    clean: dict[str, int] = {}
    for key, value in split.items():
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise InvalidArgument(f"Traffic split value for {key!r} must be an integer.") from None
        if number < 0 or number > 100:
            raise InvalidArgument(f"Traffic split value for {key!r} must be in [0, 100].")
        clean[str(key)] = number
    if clean and sum(clean.values()) != 100:
        raise InvalidArgument(
            f"Sum of all traffic within traffic split needs to be 100, got {sum(clean.values())}.")
    return clean


def after_deploy(current: dict[str, int], requested: dict[str, int] | None, new_id: str,
                 deployed: list[str]) -> dict[str, int]:
    """The split once `new_id` is deployed. `requested` may name existing deployed models and
    "0" (the one being deployed); without one, a first model takes all traffic and a later one
    none (the split is unchanged)."""
    if not requested:
        return {new_id: 100} if not deployed else dict(current)
    split = _check_values(requested)
    unknown = sorted(set(split) - set(deployed) - {DEPLOYING_KEY})
    if unknown:
        raise InvalidArgument(
            f"Traffic split references unknown deployed model id(s): {', '.join(unknown)}.")
    if DEPLOYING_KEY in split:
        split[new_id] = split.pop(DEPLOYING_KEY)
    return {key: value for key, value in split.items() if value}


def after_undeploy(current: dict[str, int], requested: dict[str, int] | None, gone: str,
                   remaining: list[str]) -> dict[str, int]:
    """The split once `gone` is undeployed; refused while it would still receive traffic."""
    if requested:
        split = _check_values(requested)
        if split.get(gone):
            raise FailedPrecondition(
                f"Model {gone} being undeployed should have 0 traffic in the new traffic split.")
        unknown = sorted(set(split) - set(remaining) - {gone})
        if unknown:
            raise InvalidArgument(
                f"Traffic split references unknown deployed model id(s): {', '.join(unknown)}.")
        return {key: value for key, value in split.items() if value and key != gone}
    if current.get(gone) and remaining:
        raise FailedPrecondition(
            f"Model {gone} has {current[gone]}% of the endpoint's traffic. Update the traffic "
            "split so that it gets none (or pass trafficSplit) before undeploying it.")
    return {key: value for key, value in current.items() if key != gone and value}


def replace(requested: dict[str, int], deployed: list[str]) -> dict[str, int]:
    """An endpoint patch's new split: every key must be a deployed model."""
    split = _check_values(requested)
    unknown = sorted(set(split) - set(deployed))
    if unknown:
        raise InvalidArgument(
            f"Traffic split references unknown deployed model id(s): {', '.join(unknown)}.")
    return {key: value for key, value in split.items() if value}


class Router:
    """Picks a deployed model per request with the split's weights, from a random sequence
    seeded with the endpoint's name and the split, so a test that sends requests to one
    process in order gets the same choices every run."""

    def __init__(self, endpoint: str, split: dict[str, int]) -> None:
        ordered = sorted((key, value) for key, value in split.items() if value > 0)
        self.ids = [key for key, _ in ordered]
        self.cumulative = list(itertools.accumulate(value for _, value in ordered))
        # Routing, not security: a seeded sequence is the point.
        self._random = random.Random(f"{endpoint}|{sorted(split.items())}")  # noqa: S311

    def choose(self) -> str | None:
        if not self.ids:
            return None
        if len(self.ids) == 1:
            return self.ids[0]
        draw = self._random.randrange(self.cumulative[-1])
        return self.ids[bisect.bisect_right(self.cumulative, draw)]
