"""Every example of README.md and docs/*.md does what its page says, found by the convention of
docs/development.md ("Examples in the documentation"): `sh` blocks' curl commands answer 2xx with
their documented output against a server like `make serve`'s, `python` blocks run as written and
print what their comments say, synopses name only commands and options the command line has,
and `json` / `yaml` blocks parse. Blocks needing a setup run in test_setups.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import click
import pytest
import yaml

from tests.conftest import ROOT, LiveServer
from tests.docs import examples
from tests.docs.examples import Block

pytestmark = pytest.mark.slow

#: curl as written, plus the HTTP status on a line of its own after the body (the one thing the
#: command's own output lacks to tell an answer from an error).
CURL_PRELUDE = "curl() { command curl --silent --show-error --write-out '\\n%{http_code}' \"$@\"; }\n"
LOCAL_HTTP = re.compile(r"(127\.0\.0\.1|localhost):8080\b")
LOCAL_GRPC = re.compile(r"(127\.0\.0\.1|localhost):8081\b")


def local(text: str, server: LiveServer) -> str:
    """The text with `make serve`'s addresses (HTTP 8080, with or without `http://`; gRPC 8081)
    pointing at `server`."""
    assert server.grpc_target is not None
    http = server.url.removeprefix("http://")
    return LOCAL_GRPC.sub(server.grpc_target, LOCAL_HTTP.sub(http, text))


def ids(blocks: list[Block]) -> list[str]:
    return [block.where for block in blocks]


SH = [b for b in examples.example_blocks() if b.lang == "sh"]
PYTHON = [b for b in examples.example_blocks() if b.lang == "python"]
SYNOPSES = examples.example_blocks("synopsis")


def test_every_example_block_says_how_it_is_checked() -> None:
    """A bare `sh` block is a run example; anything else must say so in a form this suite knows."""
    bad = [f"{block.where}: ```{block.lang} {block.mode}" for page in examples.pages()
           for block in examples.blocks(page)
           if block.lang in examples.EXAMPLES and not examples.MODE.match(block.mode)]
    assert bad == [], "modes: none, synopsis, setup=NAME, 'no-run: REASON' (docs/development.md)"
    assert SH and PYTHON and SYNOPSES  # the pages have examples of every kind


@pytest.mark.parametrize("block", SH, ids=ids(SH))
def test_sh_example_answers_as_documented(block: Block, demo_server: LiveServer) -> None:
    steps = examples.sh_steps(block)
    assert steps, f"{block.where}: an empty example"
    for step in steps:
        assert step.command.startswith("curl "), (
            f"{block.where}: {step.command!r}: a run `sh` block holds curl commands; mark others "
            "`synopsis`, `setup=NAME` or `no-run: REASON`")
        command = local(step.command, demo_server)
        run = subprocess.run(["bash", "-c", CURL_PRELUDE + command], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
        assert run.returncode == 0, (step.command, run.stderr)
        body, _, status = run.stdout.rpartition("\n")
        assert status.startswith("2"), (step.command, status, body)
        answer = json.loads(body)
        assert answer and "error" not in answer, (step.command, answer)
        if step.expected is not None:
            assert examples.same_value(answer, json.loads(step.expected)), (step.command, body)
            if "\n" in step.expected:  # a documented layout is the server's, byte for byte
                assert body.rstrip("\n") == step.expected, (step.command, body)


@pytest.mark.parametrize("block", PYTHON, ids=ids(PYTHON))
def test_python_example_runs_as_written(block: Block, demo_server: LiveServer) -> None:
    code = local(block.text, demo_server)
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, (block.where, run.stderr)
    expected = examples.python_expectations(block.text)
    printed = run.stdout.splitlines()
    # Each documented line is printed, in order (other prints may come between them).
    for want in expected:
        while printed and not examples.same_value(examples.python_value(printed[0]),
                                                  examples.python_value(want)):
            printed.pop(0)
        assert printed, (block.where, f"never printed {want!r}", run.stdout)
        printed.pop(0)


def _leaf(words: list[str]) -> tuple[click.Command, list[str]]:
    """The command a synopsis line names (`./mlemu jobs submit prediction ...`) and its path."""
    from app import main

    command: click.Command = main
    path: list[str] = []
    with click.Context(main) as ctx:
        for word in words:
            if not isinstance(command, click.Group):
                break
            sub = command.get_command(ctx, word)
            if sub is None:
                break
            command, path = sub, [*path, word]
    return command, path


@pytest.mark.parametrize("block", SYNOPSES, ids=ids(SYNOPSES))
def test_synopsis_names_real_commands_and_options(block: Block) -> None:
    steps = examples.sh_steps(block)
    assert steps
    for step in steps:
        words = step.command.split()
        program = 2 if words[:2] == ["python", "app.py"] else 1
        assert words[0] == "./mlemu" or program == 2, (block.where, step.command)
        command, path = _leaf(words[program:])
        assert path and not isinstance(command, click.Group), (block.where, step.command)
        options = {name for param in command.params for name in param.opts + param.secondary_opts}
        named = set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", step.command))
        assert named - options == set(), (block.where, " ".join(path), sorted(options))


DATA = [b for page in examples.pages() for b in examples.blocks(page) if b.lang in ("json", "yaml")]


@pytest.mark.parametrize("block", DATA, ids=ids(DATA))
def test_json_and_yaml_blocks_parse(block: Block) -> None:
    if block.lang == "json":
        json.loads(block.text)  # NaN and Infinity are JSON to mlemu too
    else:
        assert yaml.safe_load(block.text) is not None
