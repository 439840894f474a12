#!/usr/bin/env python3
"""Regenerate the Python modules of every .proto under koordinator/grpcapi (or, with --check, fail if they are stale).

Usage: python scripts/gen_protos.py [--check]

Each ``X.proto`` gets ``X_pb2.py``, ``X_pb2.pyi`` and ``X_pb2_grpc.py`` next to it, compiled with
grpcio-tools from the repository root (``-I .``), so the generated imports are absolute
(``from koordinator.grpcapi.runtime.v1 import api_pb2``). The output depends on the grpcio-tools
version, which the ``test`` extra of pyproject.toml pins.

--check compiles into a temporary folder and compares: it prints each committed file that differs,
is missing, or has no .proto any more, and exits 1; it exits 0, silently, when everything is current.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOT = Path("koordinator") / "grpcapi"
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def protos(repo: Path = REPO) -> list[Path]:
    """The .proto files under koordinator/grpcapi, relative to the repository root."""
    return sorted(p.relative_to(repo) for p in (repo / ROOT).rglob("*.proto"))


def outputs(proto: Path) -> list[Path]:
    """The generated files of one .proto (relative paths)."""
    stem = proto.with_suffix("")
    return [stem.with_name(stem.name + suffix) for suffix in SUFFIXES]


def compile_into(out: Path, repo: Path = REPO) -> None:
    """Compile every .proto into ``out`` (which mirrors the repository layout)."""
    files = [str(p) for p in protos(repo)]
    if not files:
        return
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I", ".",
           f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}", *files]
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"grpc_tools.protoc failed:\n{proc.stderr}")


def stale_files(repo: Path = REPO) -> list[str]:
    """One line per committed generated file that is not what the protos generate now."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        compile_into(Path(tmp), repo)
        wanted = {rel for proto in protos(repo) for rel in outputs(proto)}
        for rel in sorted(wanted):
            generated = (Path(tmp) / rel).read_bytes()
            committed = repo / rel
            if not committed.exists():
                problems.append(f"{rel}: missing")
            elif committed.read_bytes() != generated:
                problems.append(f"{rel}: differs from what scripts/gen_protos.py generates")
    for suffix in SUFFIXES:
        for path in sorted((repo / ROOT).rglob("*" + suffix)):
            rel = path.relative_to(repo)
            if rel not in wanted:
                problems.append(f"{rel}: no .proto generates this file")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated module is stale")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale_files()
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            from importlib.metadata import version
            print(f"(compiled with grpcio-tools {version('grpcio-tools')}; run `python scripts/gen_protos.py`)",
                  file=sys.stderr)
        return 1 if problems else 0
    compile_into(REPO)
    print(f"generated the modules of {len(protos())} .proto files under {ROOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
