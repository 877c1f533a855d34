"""The architecture's import rules (DESIGN.md): imports point down, Flask stays in the adapters,
no two modules import each other at run time, and `import predictors` pulls in no ML framework."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Top-level module/package -> layer; a module may import only from its own layer or below
#: (TYPE_CHECKING imports included: an annotation that names a higher layer is an upward edge).
LAYERS = {
    "core": 0,
    "auth": 1, "registry": 1, "predictors": 1, "explainers": 1, "batch": 1, "observability": 1,
    "controls": 1,
    "emulator": 2,
    "dataplane": 3, "controlplane": 3, "admin": 3,
    "api": 4, "protocols": 4, "web": 4, "console": 4,
    "app": 5, "boot": 5, "grpcserve": 5, "cli": 5,
}
#: What may stand at the top level besides the packages above (DESIGN.md's layout).
ROOT_FILES = {"app.py", "setup.py"}  # setup.py: the build step (protocols/_generated)
ROOT_PACKAGES_OUTSIDE_LAYERS = {"deploy", "tests", "bench", "tools", "demo", "protos", "docs",
                                "pytest_mlemu"}
FLASK_ALLOWED = {"app", "api", "protocols", "web", "console"}


def _source_files():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in LAYERS or (rel.stem in LAYERS and len(rel.parts) == 1):
            if "_generated" in rel.parts:
                continue
            yield rel, path


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (annotations only, never imported)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            continue
        yield node
        yield from _runtime_nodes(node)


def _imports(path: Path):
    """Every top-level name `path` imports, TYPE_CHECKING imports included."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_imports_point_down_and_flask_stays_in_adapters():
    problems = []
    for rel, path in _source_files():
        owner = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        layer = LAYERS[owner]
        for name in _imports(path):
            if name in ("flask", "werkzeug") and owner not in FLASK_ALLOWED:
                problems.append(f"{rel} imports {name}")
            if name in LAYERS and name != owner and LAYERS[name] > layer:
                problems.append(f"{rel} (layer {layer}) imports {name} (layer {LAYERS[name]})")
    assert not problems, "\n".join(problems)


def test_the_root_holds_app_and_packages():
    """The top level is app.py, the launcher, build files and packages: every other Python
    module belongs to a package by concern."""
    loose = sorted(p.name for p in ROOT.glob("*.py") if p.name not in ROOT_FILES)
    assert not loose, f"modules at the top level: {loose}"
    for path in ROOT.iterdir():
        if path.is_dir() and (path / "__init__.py").exists():
            assert path.name in LAYERS or path.name in ROOT_PACKAGES_OUTSIDE_LAYERS, path.name


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path: Path, modules: set[str]):
    """The project modules `path` imports at run time, at module level or inside a function
    (`from pkg import sub` names the module pkg.sub when there is one; TYPE_CHECKING imports
    are skipped: they never run)."""
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if full in modules else node.module


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles_at_run_time():
    files = {_module_name(rel): path for rel, path in _source_files()}
    modules = set(files)
    graph = {name: {target for target in _module_imports(path, modules)
                    if target in modules and target != name}
             for name, path in files.items()}
    cycles = _cycles(graph)
    assert not cycles, "modules importing each other at run time:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles)


def test_import_predictors_loads_no_framework():
    code = (
        "import sys, predictors, predictors.custom, registry.deployments, dataplane\n"
        "heavy = [m for m in ('tensorflow', 'xgboost', 'sklearn', 'torch') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def _imported_modules(path: Path):
    """Every module an absolute import names, `from pkg import name` counting `pkg.name` too."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _private_owner(module: str) -> str | None:
    """The package a `_`-prefixed module belongs to (`api._requests` -> `api`), else None."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__") and index > 0:
            return "/".join(parts[:index])
    return None


def test_no_module_imports_another_packages_private_modules():
    """A module `pkg/_x.py` (or package `pkg/_x/`) is imported only from inside `pkg/`: what two
    packages share is public (web/ for the HTTP adapters, protocols/proto_modules.py for the
    generated protobuf modules)."""
    problems = []
    skip = {".venv", ".venvs", "_generated", ".git"}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if skip & set(rel.parts):
            continue
        for module in _imported_modules(path):
            owner = _private_owner(module)
            if owner is not None and not rel.as_posix().startswith(owner + "/"):
                problems.append(f"{rel} imports {module}, private to {owner}/")
    assert not problems, "\n".join(sorted(set(problems)))


def test_the_server_imports_no_beam():
    """Beam loads only in a batch prediction job's own process (batch/pipeline.py): building the
    app and serving a scikit-learn model never import it."""
    code = (
        "import sys, tempfile, pathlib\n"
        "from app import create_app\n"
        "from core.settings import Settings\n"
        "create_app(Settings(state_dir=pathlib.Path(tempfile.mkdtemp())), warm=False)\n"
        "import batch, batch.launcher, batch.runners, batch.records, controlplane.jobs\n"
        "print([m for m in sys.modules if m.split('.')[0] == 'apache_beam'][:3])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_every_layered_package_ships_in_the_wheel():
    """pyproject.toml's package list names every package of the layers (a package left out
    would be missing from an installed mlemu and fail its import at start)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    included = set(config["tool"]["setuptools"]["packages"]["find"]["include"])
    missing = sorted(name for name in LAYERS
                     if (ROOT / name / "__init__.py").exists() and name not in included)
    assert not missing, f"packages missing from pyproject.toml's include list: {missing}"
