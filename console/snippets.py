"""The "try it" request as the user would send it themselves: a curl command and Python with
google-api-python-client (the client the ml v1 API is used through).

With IAM enforced the snippets read the credential from the MLEMU_TOKEN environment variable:
the console keeps the user's token in an HttpOnly cookie and never writes it into a page.
"""

from __future__ import annotations

import json
import pprint
import shlex
from typing import Any

from predictors.base import Signature

#: ml v1 methods the try-it form sends, with their googleapiclient call.
METHODS = {"predict": "ml.projects().predict", "explain": "ml.projects().explain"}


#: Widest row the try-it form fills in from a signature (wider ones start empty).
MAX_EXAMPLE_COLUMNS = 64
_NUMERIC = ("FP", "INT", "UINT")


def example_body(signature: Signature | None) -> str:
    """The try-it form's starting body: one row of zeros when the loaded model says it takes a
    single numeric input of rows of N values (scikit-learn, XGBoost), else no instances."""
    if signature is not None and len(signature.inputs) == 1:
        spec = signature.inputs[0]
        if len(spec.shape) == 2 and 0 < spec.shape[1] <= MAX_EXAMPLE_COLUMNS \
                and spec.datatype.startswith(_NUMERIC):
            return json.dumps({"instances": [[0.0] * spec.shape[1]]})
    return json.dumps({"instances": []})


def curl(base_url: str, name: str, method: str, body: Any, enforced: bool) -> str:
    url = f"{base_url.rstrip('/')}/v1/{name}:{method}"
    lines = [f"curl -sS -X POST {shlex.quote(url)}", "  -H 'Content-Type: application/json'"]
    if enforced:
        lines.append('  -H "Authorization: Bearer $MLEMU_TOKEN"')
    lines.append(f"  -d {shlex.quote(json.dumps(body))}")
    return " \\\n".join(lines)


def _credentials(enforced: bool) -> tuple[str, str]:
    """The imports and the credentials expression of a Python snippet."""
    if enforced:
        return ("import os\n\nfrom google.oauth2.credentials import Credentials\n",
                'Credentials(os.environ["MLEMU_TOKEN"])')
    return "from google.auth.credentials import AnonymousCredentials\n", "AnonymousCredentials()"


def python(base_url: str, name: str, method: str, body: Any, enforced: bool) -> str:
    imports, credentials = _credentials(enforced)
    body_text = pprint.pformat(body, width=80, sort_dicts=False)
    return (f"{imports}from googleapiclient.discovery import build\n\n"
            f'ml = build("ml", "v1", static_discovery=True, credentials={credentials},\n'
            f'           client_options={{"api_endpoint": {base_url.rstrip("/")!r}}})\n'
            f"body = {body_text}\n"
            f"print({METHODS[method]}(name={name!r}, body=body).execute())\n")


def vertex_python(base_url: str, endpoint: str, method: str, body: Any, enforced: bool) -> str:
    """The same request with the Vertex AI SDK (google-cloud-aiplatform) over REST: `instances`
    and `parameters` of the body are the SDK call's arguments."""
    imports, credentials = _credentials(enforced)
    parts = endpoint.split("/")  # projects/P/locations/L/endpoints/E
    instances = body.get("instances", []) if isinstance(body, dict) else body
    parameters = body.get("parameters") if isinstance(body, dict) else None
    arguments = f"instances={pprint.pformat(instances, width=80, sort_dicts=False)}"
    if parameters is not None:
        arguments += f", parameters={pprint.pformat(parameters, width=80, sort_dicts=False)}"
    shown = "predictions" if method == "predict" else "explanations"
    return (f"{imports}from google.cloud import aiplatform\n\n"
            f"aiplatform.init(project={parts[1]!r}, location={parts[3]!r},\n"
            f"                api_endpoint={base_url.rstrip('/')!r}, api_transport=\"rest\",\n"
            f"                credentials={credentials})\n"
            f"endpoint = aiplatform.Endpoint({endpoint!r})\n"
            f"print(endpoint.{method}({arguments}).{shown})\n")
