"""Paths for the perfcast package tests: the source tree and the perfcast binary, from
the environment ctest sets (tests/CMakeLists.txt), else the usual build folder."""
import os
import pathlib

import pytest

SOURCE = pathlib.Path(os.environ.get("PERFCAST_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CLI = os.environ.get("PERFCAST_CLI", str(SOURCE / "build" / "cli" / "perfcast"))


@pytest.fixture
def src():
    return SOURCE


@pytest.fixture
def cli():
    return CLI
