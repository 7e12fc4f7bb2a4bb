"""The package's stubs: a type checker knows every name of the contract."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import multicluster_kafka as mck

HERE = pathlib.Path(__file__).parent


def test_mypy_checks_a_program_against_the_stubs(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path),
         str(HERE / "typing" / "contract.py")],
        cwd=tmp_path, capture_output=True, text=True,
    )
    errors = [l for l in out.stdout.splitlines() if ": error:" in l]
    assert len(errors) == 1 and '"Source" has no attribute "opn"' in errors[0], out.stdout


def test_every_public_name_has_a_docstring():
    for name in mck.__all__:
        obj = getattr(mck, name)
        if callable(obj):
            assert obj.__doc__, f"{name} has no docstring"
