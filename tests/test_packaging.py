"""What the distribution installs: every package under a `koordinator*` name, none forgotten.

The repository keeps its top-level folders; pyproject.toml maps ``roles/`` to ``koordinator_roles`` and
``schemas/`` to ``koordinator_schemas`` and lists the packages one by one (setuptools' discovery cannot
rename), so a new subpackage that is not listed would be missing from the wheel and the image.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_under_its_installed_name():
    on_disk = set()
    for package, folder in CONFIG["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            on_disk.add(".".join((package, *relative)))
    assert sorted(CONFIG["packages"]) == sorted(on_disk)
    assert all(p.split(".")[0].startswith("koordinator") for p in CONFIG["packages"])
    assert set(CONFIG["package-dir"].values()) == {"koordinator", "roles", "schemas"}


def test_installed_names_resolve_and_no_generic_name_is_installed(tmp_path):
    """Outside the repository (no folder on sys.path), only the koordinator* names import."""
    code = ("import importlib.util as u, koordinator_roles, koordinator_schemas, koordinator.cli; "
            "print(koordinator_roles.__file__); print(koordinator_schemas.__file__); "
            "print(u.find_spec('roles'), u.find_spec('schemas'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    roles_init, schemas_init, generic = proc.stdout.splitlines()
    assert Path(roles_init) == REPO / "roles" / "__init__.py"
    assert Path(schemas_init) == REPO / "schemas" / "__init__.py"
    assert generic == "None None"
