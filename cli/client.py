"""Command-line verbs for a running mlemu, in the spirit of `gcloud ai-platform`:

  python app.py models create MODEL [--description D] [--labels k=v,..] [--region R]
  python app.py models list
  python app.py versions create VERSION --model M --origin DIR [--framework F]
      [--prediction-class module.Class] [--package-uris a.tar.gz,b.whl] [--async]
      [--explanation-method integrated-gradients|sampled-shapley|xrai]
      [--num-integral-steps N] [--num-paths N]
  python app.py versions list --model M
  python app.py versions set-default VERSION --model M
  python app.py versions delete VERSION --model M [--async]
  python app.py explain --model M [--version V] --json-instances FILE

Every verb takes --url (default http://127.0.0.1:8080), --project (default $MLEMU_PROJECT,
else the server's default project, which `GET /healthz` names; `make serve` uses "demo") and
--token (a bearer token for a server enforcing IAM), and talks to the
server's ml v1 API over HTTP; create and delete wait for their operation like gcloud does unless
--async is given. Local paths are sent as absolute paths.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

import click

from core.settings import Settings

DEFAULT_URL = "http://127.0.0.1:8080"
#: gcloud beta's --explanation-method values -> ExplanationConfig field and its count field.
EXPLANATION_METHODS = {
    "integrated-gradients": ("integratedGradientsAttribution", "numIntegralSteps"),
    "sampled-shapley": ("sampledShapleyAttribution", "numPaths"),
    "xrai": ("xraiAttribution", "numIntegralSteps"),
}
#: gcloud's limit on instances per online request (`ai-platform predict|explain`).
MAX_INSTANCES = 100
WAIT_TIMEOUT_S = 600.0


class Api:
    def __init__(self, url: str, project: str | None, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.base = self.url + "/v1/"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server_project = self._server_project()
        self.project = project or self.server_project or Settings().default_project

    def _server_project(self) -> str | None:
        """The project the server serves by default (its MLEMU_PROJECT), from /healthz."""
        import requests

        try:
            project = requests.get(f"{self.url}/healthz", timeout=10).json().get("project")
        except (requests.RequestException, ValueError, AttributeError):
            return None  # an unreachable server is reported by the call that needs it
        return project if isinstance(project, str) and project else None

    def empty_note(self, what: str) -> None:
        """Say where an empty list was looked for, when the server's default is elsewhere."""
        if self.server_project and self.server_project != self.project:
            click.echo(f"Listed 0 {what} in project [{self.project}]; the server's default "
                       f"project is [{self.server_project}] (--project {self.server_project}).",
                       err=True)

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> dict[str, Any]:
        import requests  # here, not at the top: `app.py serve` starts faster without it

        try:
            resp = requests.request(method, self.base + path, json=body, timeout=60,
                                    headers=self.headers,
                                    params={k: v for k, v in params.items() if v is not None})
        except requests.RequestException as exc:
            raise click.ClickException(f"Cannot reach mlemu at {self.base}: {exc}") from None
        try:
            data: dict[str, Any] = resp.json()
        except ValueError:
            raise click.ClickException(f"HTTP {resp.status_code}: {resp.text[:500]}") from None
        if resp.status_code >= 400:
            error = data.get("error", {})
            raise click.ClickException(f"{error.get('status', resp.status_code)}: "
                                       f"{error.get('message', resp.text[:500])}")
        return data

    def list_all(self, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
        """Every item of a list method, following nextPageToken."""
        items: list[dict[str, Any]] = []
        token = None
        while True:
            page = self.call("GET", path, pageToken=token, **params)
            items += page.get(key, [])
            token = page.get("nextPageToken")
            if not token:
                return items

    def model(self, model: str) -> str:
        return f"projects/{self.project}/models/{model}"

    def wait(self, op: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while not op.get("done"):
            if time.monotonic() > deadline:
                raise click.ClickException(f"Timed out waiting for {op['name']}.")
            time.sleep(0.5)
            op = self.call("GET", op["name"])
        if "error" in op:
            raise click.ClickException(op["error"].get("message", "The operation failed."))
        return op


def with_api(fn: Callable[..., Any]) -> Callable[..., Any]:
    @click.option("--url", default=DEFAULT_URL, show_default=True, help="mlemu server URL.")
    @click.option("--project", default=None,
                  help="Project id (default $MLEMU_PROJECT, else the server's default project).")
    @click.option("--token", default=None,
                  help="Bearer token (static token, self-signed JWT, ID token) when IAM is enforced.")
    @functools.wraps(fn)
    def wrapper(url: str, project: str | None, token: str | None, **kwargs: Any) -> Any:
        return fn(Api(url, project or _configured_project(), token), **kwargs)

    return wrapper


def _configured_project() -> str | None:
    """$MLEMU_PROJECT when it is set to something else than the built-in default."""
    project = Settings.from_env().default_project
    return project if project != Settings().default_project else None


def local_uri(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


@click.group("models")
def models() -> None:
    """Create and list models on a running mlemu."""


@models.command("create")
@click.argument("model")
@click.option("--description", default=None)
@click.option("--labels", default=None, help="Comma-separated key=value pairs.")
@click.option("--region", "regions", multiple=True, help="At most one region.")
@with_api
def models_create(api: Api, model: str, description: str | None, labels: str | None,
                  regions: tuple[str, ...]) -> None:
    """Create a model (`gcloud ai-platform models create`)."""
    body: dict[str, Any] = {"name": model}
    if description:
        body["description"] = description
    if labels:
        body["labels"] = dict(pair.split("=", 1) for pair in labels.split(",") if "=" in pair)
    if regions:
        body["regions"] = list(regions)
    api.call("POST", f"projects/{api.project}/models", body)
    click.echo(f"Created model [{model}].")


@models.command("list")
@with_api
def models_list(api: Api) -> None:
    """List the project's models and their default versions."""
    rows = [[m["name"].rsplit("/", 1)[-1],
             m.get("defaultVersion", {}).get("name", "").rsplit("/", 1)[-1]]
            for m in api.list_all(f"projects/{api.project}/models", "models")]
    table(rows, ["NAME", "DEFAULT_VERSION_NAME"])
    if not rows:
        api.empty_note("models")


@click.group("versions")
def versions() -> None:
    """Create, list, set the default of, and delete versions on a running mlemu."""


@versions.command("create")
@click.argument("version")
@click.option("--model", required=True)
@click.option("--origin", required=True, help="Model directory (local path or file:// URI).")
@click.option("--framework", type=click.Choice(["SCIKIT_LEARN", "XGBOOST", "TENSORFLOW"],
                                               case_sensitive=False))
@click.option("--prediction-class", default=None, help="module.Class of a custom predictor.")
@click.option("--package-uris", default=None, help="Comma-separated packages.")
@click.option("--description", default=None)
@click.option("--explanation-method", type=click.Choice(sorted(EXPLANATION_METHODS)),
              help="Feature attribution method for :explain (as gcloud beta).")
@click.option("--num-integral-steps", type=int, default=50, show_default=True,
              help="Steps for integrated-gradients and xrai.")
@click.option("--num-paths", type=int, default=50, show_default=True,
              help="Paths for sampled-shapley.")
@click.option("--async", "no_wait", is_flag=True, help="Return without waiting for the operation.")
@with_api
def versions_create(api: Api, version: str, model: str, origin: str, framework: str | None,
                    prediction_class: str | None, package_uris: str | None,
                    description: str | None, explanation_method: str | None,
                    num_integral_steps: int, num_paths: int, no_wait: bool) -> None:
    """Create a version from a model directory (waits for READY)."""
    body: dict[str, Any] = {"name": version, "deploymentUri": local_uri(origin)}
    if explanation_method:
        field, count_field = EXPLANATION_METHODS[explanation_method]
        count = num_paths if count_field == "numPaths" else num_integral_steps
        body["explanationConfig"] = {field: {count_field: count}}
    if framework:
        body["framework"] = framework.upper()
    if prediction_class:
        body["predictionClass"] = prediction_class
    if package_uris:
        body["packageUris"] = [local_uri(u) for u in package_uris.split(",") if u]
    if description:
        body["description"] = description
    op = api.call("POST", f"{api.model(model)}/versions", body)
    if no_wait:
        click.echo(op["name"])
        return
    api.wait(op)
    click.echo(f"Created version [{version}] of model [{model}].")


@versions.command("list")
@click.option("--model", required=True)
@with_api
def versions_list(api: Api, model: str) -> None:
    """List a model's versions and their states."""
    rows = [[v["name"].rsplit("/", 1)[-1], v.get("deploymentUri", ""), v.get("state", ""),
             "yes" if v.get("isDefault") else ""]
            for v in api.list_all(f"{api.model(model)}/versions", "versions")]
    table(rows, ["NAME", "DEPLOYMENT_URI", "STATE", "DEFAULT"])


@versions.command("set-default")
@click.argument("version")
@click.option("--model", required=True)
@with_api
def versions_set_default(api: Api, version: str, model: str) -> None:
    """Make a READY version the model's default."""
    api.call("POST", f"{api.model(model)}/versions/{version}:setDefault", {})
    click.echo(f"Version [{version}] is now the default of model [{model}].")


@versions.command("delete")
@click.argument("version")
@click.option("--model", required=True)
@click.option("--async", "no_wait", is_flag=True, help="Return without waiting for the operation.")
@with_api
def versions_delete(api: Api, version: str, model: str, no_wait: bool) -> None:
    """Delete a version and wait until it is gone."""
    op = api.call("DELETE", f"{api.model(model)}/versions/{version}")
    if no_wait:
        click.echo(op["name"])
        return
    api.wait(op)
    click.echo(f"Deleted version [{version}] of model [{model}].")


def read_json_instances(data: str) -> list[Any]:
    """Newline-delimited JSON instances, with gcloud's checks and wording."""
    import json

    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if not lines:
        raise click.ClickException("No valid instance was found.")
    instances = []
    for line in lines:
        if not line.strip():
            raise click.ClickException("Empty line is not allowed in the instances file.")
        try:
            instances.append(json.loads(line))
        except ValueError:
            raise click.ClickException("Input instances are not in JSON format.") from None
    if len(instances) > MAX_INSTANCES:
        raise click.ClickException(f"You can only explain no more than {MAX_INSTANCES} "
                                   "instances per request.")
    return instances


@click.command("explain")
@click.option("--model", required=True)
@click.option("--version", default=None, help="Version (default: the model's default version).")
@click.option("--json-instances", required=True, type=click.File("r"),
              help="Newline-delimited JSON instances ('-' for stdin).")
@with_api
def explain(api: Api, model: str, version: str | None, json_instances: Any) -> None:
    """Feature attributions from a running mlemu (like `gcloud beta ai-platform explain`)."""
    import json

    name = api.model(model) + (f"/versions/{version}" if version else "")
    answer = api.call("POST", f"{name}:explain", {"instances": read_json_instances(json_instances.read())})
    click.echo(json.dumps(answer, indent=2, sort_keys=True))
