"""The layering contracts of pyproject.toml ([tool.importlinter]) hold, and a violation fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """Run lint-imports on the packages under ``root`` with ``root/pyproject.toml``."""
    if LINT_IMPORTS is None:
        pytest.fail("lint-imports is not installed (pip install -e '.[test]')")
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([LINT_IMPORTS, "--no-cache", "--config", str(root / "pyproject.toml")],
                          capture_output=True, text=True, timeout=120, cwd=root, env=env)


def test_contracts_are_configured():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert set(config["root_packages"]) == {"koordinator", "koordinator_roles"}
    names = [c["name"] for c in config["contracts"]]
    assert len(names) >= 4
    assert any(c["type"] == "independence" and c["modules"] == ["koordinator_roles.*"] for c in config["contracts"])


def test_the_repository_keeps_its_layering():
    proc = lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


def _copy(tmp_path: Path) -> Path:
    """The packages as installed (``roles/`` as ``koordinator_roles/``) with pyproject.toml: first on
    PYTHONPATH, so lint-imports reads this copy and not the editable install's folders."""
    root = tmp_path / "repo"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder, package in (("koordinator", "koordinator"), ("roles", "koordinator_roles")):
        shutil.copytree(REPO / folder, root / package, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def _append(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not (path.parent / "__init__.py").exists():
        (path.parent / "__init__.py").write_text("")
    with path.open("a") as f:
        f.write(f"\n{line}\n")


def test_a_violation_of_each_contract_fails(tmp_path):
    root = _copy(tmp_path)
    assert lint_imports(root).returncode == 0  # the unchanged copy passes
    _append(root / "koordinator" / "runtime" / "options.py", "import koordinator_roles.manager  # violation")
    _append(root / "koordinator_roles" / "manager" / "__init__.py", "import koordinator_roles.scheduler  # violation")
    _append(root / "koordinator_roles" / "scheduler" / "__init__.py", "")
    _append(root / "koordinator" / "local.py", "import urllib3  # violation")
    _append(root / "koordinator" / "local.py", "import koordinator_roles.manager.local  # violation: local asks roles through the contract")
    _append(root / "koordinator_roles" / "scheduler" / "client.py", "import http.client  # violation")
    _append(root / "koordinator" / "apiserver" / "store.py", "from koordinator.runtime import errors  # violation")
    proc = lint_imports(root)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "koordinator.runtime.options -> koordinator_roles.manager" in out
    assert "koordinator_roles.manager -> koordinator_roles.scheduler" in out
    assert "koordinator.local -> urllib3" in out
    assert "koordinator.local -> koordinator_roles.manager.local" in out
    assert "koordinator_roles.scheduler.client -> http" in out
    assert "koordinator.apiserver.store -> koordinator.runtime.errors" in out
    assert "Contracts: 0 kept" not in out  # the untouched contract still passes


def test_a_scheduler_plugin_importing_another_plugin_fails(tmp_path):
    root = _copy(tmp_path)
    plugins = root / "koordinator_roles" / "scheduler" / "plugins"
    _append(plugins / "imagelocality.py", "from koordinator_roles.scheduler.plugins.nodeaffinity import NodeAffinity  # violation")
    _append(plugins / "nodename.py", "from koordinator_roles.scheduler.plugins.helper.normalize import default_normalize_score")
    proc = lint_imports(root)
    out = " ".join((proc.stdout + proc.stderr).split())  # lint-imports wraps long lines
    assert proc.returncode != 0, out
    assert "koordinator_roles.scheduler.plugins.imagelocality -> koordinator_roles.scheduler.plugins.nodeaffinity" in out
    assert "koordinator_roles.scheduler.plugins.nodename ->" not in out  # the shared helpers are allowed


def _import_circles(graph, package: str) -> list[list[str]]:
    """The import circles (strongly connected components of two or more modules) among ``package``'s modules."""
    modules = sorted({package} | graph.find_descendants(package))
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(m: str) -> None:  # Tarjan's algorithm
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in edges[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            component = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                component.append(n)
                if n == m:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for m in modules:
        if m not in index:
            visit(m)
    return circles


def test_the_api_server_modules_import_no_circle():
    # Module by module, imports under TYPE_CHECKING included: a helper that needs the server
    # depends on writer.ObjectWriter, never on app.ApiServer.
    import grimp

    graph = grimp.build_graph("koordinator", cache_dir=None)
    assert _import_circles(graph, "koordinator.apiserver") == []
    importers = graph.find_modules_that_directly_import("koordinator.apiserver.app")
    assert importers <= {"koordinator.apiserver.server"}, importers


def test_an_import_circle_in_the_api_server_fails(tmp_path):
    root = _copy(tmp_path)
    _append(root / "koordinator" / "apiserver" / "pods.py", "from koordinator.apiserver import app  # violation")
    proc = lint_imports(root)
    out = " ".join((proc.stdout + proc.stderr).split())  # lint-imports wraps long lines
    assert proc.returncode != 0, out
    assert "No cycles are allowed in koordinator.apiserver" in out
    assert "koordinator.apiserver.pods -> koordinator.apiserver.app" in out
