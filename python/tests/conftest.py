"""Shared paths: the repository this package lives in (its corpus, samples
and the artifact's recorded facts are read from there, as every runtime's
tests read them)."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"


def case_names():
    return sorted(p.name for p in VECTORS.iterdir() if p.is_dir())


@pytest.fixture(scope="session")
def people():
    import omnigraph_validate as og

    return og.compile_schema((ROOT / "samples" / "people.pg").read_text(encoding="utf-8"))
