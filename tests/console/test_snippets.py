"""The try-it form's starting body and the snippets it shows: a body with shell and Python
metacharacters stays one argument, one literal."""

from __future__ import annotations

import ast
import json
import shlex

from console.snippets import curl, example_body, python
from predictors.base import Signature, TensorSpec


def test_try_it_starts_from_a_row_the_signature_describes():
    rows_of_4 = Signature(inputs=(TensorSpec("input-0", "FP64", (-1, 4)),))
    assert example_body(rows_of_4) == '{"instances": [[0.0, 0.0, 0.0, 0.0]]}'
    for unknown in (None, Signature(), Signature(inputs=(TensorSpec("x", "BYTES", (-1, 2)),)),
                    Signature(inputs=(TensorSpec("x", "FP32", (-1, 10_000)),))):
        assert example_body(unknown) == '{"instances": []}'


def test_snippets_quote_what_the_user_typed():
    body = {"instances": [["it's", "$(rm -rf /)", "`x`"]], "note": "\\'\""}
    command = curl("http://127.0.0.1:8080/", "projects/p/models/m/versions/v", "predict", body,
                   enforced=True)
    words = shlex.split(command.replace("\\\n", " "))
    assert words[:4] == ["curl", "-sS", "-X", "POST"]
    assert words[4] == "http://127.0.0.1:8080/v1/projects/p/models/m/versions/v:predict"
    assert json.loads(words[words.index("-d") + 1]) == body
    assert "Authorization: Bearer $MLEMU_TOKEN" in words
    code = python("http://127.0.0.1:8080", "projects/p/models/m/versions/v", "explain", body,
                  enforced=False)
    tree = ast.parse(code)  # valid Python
    assigned = next(node for node in tree.body if isinstance(node, ast.Assign)
                    and node.targets[0].id == "body")
    assert ast.literal_eval(assigned.value) == body
    assert "ml.projects().explain(name='projects/p/models/m/versions/v', body=body)" in code


def test_the_vertex_sdk_snippet_calls_the_endpoint():
    from console.snippets import vertex_python

    name = "projects/demo/locations/europe-west4/endpoints/42"
    code = vertex_python("http://127.0.0.1:8080/", name, "explain",
                         {"instances": [[1, 2]], "parameters": {"k": "it's"}}, enforced=True)
    ast.parse(code)
    assert "aiplatform.init(project='demo', location='europe-west4'," in code
    assert "api_endpoint='http://127.0.0.1:8080', api_transport=\"rest\"" in code
    assert 'Credentials(os.environ["MLEMU_TOKEN"])' in code
    assert f"aiplatform.Endpoint({name!r})" in code
    assert "endpoint.explain(instances=[[1, 2]], parameters={'k': \"it's\"}).explanations" in code
