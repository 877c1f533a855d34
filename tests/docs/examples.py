"""The examples of README.md and every docs/*.md page, read as the convention in
docs/development.md ("Examples in the documentation") defines them.

A fenced block's info string is `LANG [MODE]`. `sh` and `python` blocks are examples:

- no mode: run against a server like `make serve`'s (a `sh` block holds `curl` commands only);
- `synopsis`: command-line syntax, checked against the command line's own options;
- `setup=NAME`: run after the named setup of tests/docs/test_setups.py prepares what it needs;
- `no-run: REASON`: shown, not run (needs a Docker engine, a cloud account, ...); REASON is required.
- `output`: what a command prints, shown as it is.

A `# ...` comment right after a command (or after a python `print(...)`) that parses as JSON (a
Python literal for python) is that command's expected output. `json` and `yaml` blocks must parse.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent

#: Languages whose blocks are examples.
EXAMPLES = ("sh", "python")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MODE = re.compile(r"^(?:|synopsis|output|setup=[a-z_]+|no-run: \S.*)$")


def pages() -> list[Path]:
    """README.md and every page of docs/, found anew each run so a new page is covered."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    mode: str  # "", "synopsis", "output", "setup=NAME" or "no-run: REASON"
    text: str

    @property
    def where(self) -> str:
        return f"{page_id(self.page)}:{self.line}"

    @property
    def setup(self) -> str | None:
        return self.mode.removeprefix("setup=") if self.mode.startswith("setup=") else None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        info = match.group(1).strip()
        lang, _, mode = info.partition(" ")
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, lang, mode.strip(), match.group(2)))
    return found


def example_blocks(mode: str = "") -> list[Block]:
    """Every example block of every page whose mode is `mode` (setup blocks: any setup)."""
    return [block for page in pages() for block in blocks(page) if block.lang in EXAMPLES
            and (block.mode == mode or (mode == "setup" and block.setup is not None))]


@dataclasses.dataclass(frozen=True)
class Step:
    """One command of a `sh` block and the output its comment says it prints (None: none said)."""
    command: str
    expected: str | None


def sh_steps(block: Block) -> list[Step]:
    """The block's commands (continuation lines joined), each with the comment lines that follow it
    when they are its output; other comment lines are notes."""
    steps: list[Step] = []
    command: str | None = None
    comments: list[str] = []

    def close() -> None:
        if command is not None:
            steps.append(Step(command, output_of(comments)))

    for line in block.text.replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped[2:] if stripped.startswith("# ") else stripped[1:])
        elif stripped:
            close()
            command, comments = stripped, []
    close()
    return steps


def output_of(comments: list[str]) -> str | None:
    text = "\n".join(comments)
    try:
        json.loads(text)
    except ValueError:
        return None
    return text


def python_expectations(code: str) -> list[str]:
    """The expected output lines of a python block: the comment lines right after each top-level
    `print(...)` statement."""
    lines = code.splitlines()
    expected = []
    for node in ast.parse(code).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "print" and node.end_lineno is not None):
            for line in lines[node.end_lineno:]:
                if not line.startswith("# "):
                    break
                expected.append(line[2:])
    return expected


def same_value(got: Any, want: Any) -> bool:
    """Equal, floats within a relative 1e-6 (printed floats round; the values are the same)."""
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return abs(got - want) <= 1e-6 * max(abs(want), 1e-12)
    if isinstance(want, dict):
        return (isinstance(got, dict) and got.keys() == want.keys()
                and all(same_value(got[k], want[k]) for k in want))
    if isinstance(want, (list, tuple)):
        return (isinstance(got, (list, tuple)) and len(got) == len(want)
                and all(same_value(g, w) for g, w in zip(got, want, strict=True)))
    return bool(got == want) and type(got) is type(want)


def python_value(text: str) -> Any:
    """A printed Python value, or the text itself when it is not a literal (`SUCCEEDED 2`)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
