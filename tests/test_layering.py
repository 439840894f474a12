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
    assert set(config["root_packages"]) == {"koordinator", "roles"}
    names = [c["name"] for c in config["contracts"]]
    assert len(names) >= 4
    assert any(c["type"] == "independence" and c["modules"] == ["roles.*"] for c in config["contracts"])


def test_the_repository_keeps_its_layering():
    proc = lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("koordinator", "roles"):
        shutil.copytree(REPO / pkg, root / pkg, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    init = root / "koordinator" / "runtime" / "__init__.py"
    if not init.exists():  # (only while the runtime package is being written: grimp needs a regular package)
        init.write_text("")
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
    _append(root / "koordinator" / "runtime" / "options.py", "import roles.manager  # violation")
    _append(root / "roles" / "manager" / "__init__.py", "import roles.scheduler  # violation")
    _append(root / "roles" / "scheduler" / "__init__.py", "")
    _append(root / "koordinator" / "local.py", "import urllib3  # violation")
    _append(root / "roles" / "scheduler" / "client.py", "import http.client  # violation")
    _append(root / "koordinator" / "apiserver" / "store.py", "from koordinator.runtime import errors  # violation")
    proc = lint_imports(root)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "koordinator.runtime.options -> roles.manager" in out
    assert "roles.manager -> roles.scheduler" in out
    assert "koordinator.local -> urllib3" in out
    assert "roles.scheduler.client -> http" in out
    assert "koordinator.apiserver.store -> koordinator.runtime.errors" in out
    assert "Contracts: 0 kept" not in out  # the untouched contract still passes
