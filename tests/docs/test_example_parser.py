"""How tests/docs/examples.py reads a page: fences and their modes, a command's documented output
against a note, a python block's expected prints, and the value comparison."""

from __future__ import annotations

from pathlib import Path

from tests.docs import examples

PAGE = '''# A page

```sh
# a note before the command
curl -X POST http://127.0.0.1:8080/x \\
  -d '{"instances": [1]}'
# {"predictions": [1.5]}
curl http://127.0.0.1:8080/y
# not JSON: a note
```

```sh no-run: needs a Docker engine
docker build .
```

```python setup=iam
print({"a": 1})
# {'a': 1}
x = 2
print(x,
      x)
# 2 2
```

```text
not an example
```
'''


def test_blocks_commands_and_documented_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = examples.blocks(page)
    assert [(b.lang, b.mode, b.line) for b in found] == [
        ("sh", "", 3), ("sh", "no-run: needs a Docker engine", 12), ("python", "setup=iam", 16),
        ("text", "", 25)]
    assert found[2].setup == "iam" and found[0].setup is None
    assert examples.sh_steps(found[0]) == [
        examples.Step("""curl -X POST http://127.0.0.1:8080/x    -d '{"instances": [1]}'""",
                      '{"predictions": [1.5]}'),
        examples.Step("curl http://127.0.0.1:8080/y", None)]
    assert examples.python_expectations(found[2].text) == ["{'a': 1}", "2 2"]
    assert all(examples.MODE.match(b.mode) for b in found)
    assert not examples.MODE.match("no-run:") and not examples.MODE.match("skip")


def test_values_compare_floats_loosely_and_everything_else_exactly() -> None:
    assert examples.same_value({"p": [0.98821610]}, {"p": [0.9882161021232605]})
    assert not examples.same_value({"p": [0.99]}, {"p": [0.9882161021232605]})
    assert not examples.same_value([0, 2], [0, 1]) and not examples.same_value([1], [1, 2])
    assert not examples.same_value(1, True) and not examples.same_value({"a": 1}, {"b": 1})
    assert examples.python_value("SUCCEEDED 2") == "SUCCEEDED 2"
    assert examples.python_value("['a', 2]") == ["a", 2]
