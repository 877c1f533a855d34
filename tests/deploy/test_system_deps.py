"""`make test` installs the Debian packages the tests need itself (issue 16): the Makefile's
`system-deps` target, one `package:probe` line per package, apt-get only for what is missing;
CI runs nothing but the README's commands."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), *args],
                          capture_output=True, text=True, timeout=120)


def test_test_target_installs_system_deps_first():
    dry = make("-n", "test")
    assert dry.returncode == 0, dry.stderr
    assert "apt-get" in dry.stdout and dry.stdout.index("apt-get") < dry.stdout.index("pytest")


def test_system_deps_installs_only_what_is_missing():
    declared = re.findall(r"^SYSTEM_DEPS \+= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert "postgresql:/usr/lib/postgresql/*/bin/pg_ctl" in declared
    # apt-get replaced by echo: what would run, for one package present and one missing
    present = next(p for p in declared if p.startswith("postgresql:"))
    run = make("system-deps", f"SYSTEM_DEPS={present} no-such-package:/nonexistent/bin/tool",
               "APT_GET=echo apt-get")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == ("apt-get install -y -q --no-install-recommends "
                                           "no-such-package")
    assert "postgresql" not in run.stdout
    nothing = make("system-deps", f"SYSTEM_DEPS={present}", "APT_GET=false")
    assert (nothing.returncode, nothing.stdout) == (0, "")


def test_ci_runs_only_the_readme_commands():
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line and not line.startswith(("#", "set ", "cd "))]
    assert commands == ["make lint", "make test"]
