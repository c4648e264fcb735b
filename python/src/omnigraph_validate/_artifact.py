"""Where the validator artifact comes from.

Installed (`pip install ./python`): the copy the build put into this package,
`validate_bg.wasm`, with the SHA-256 recorded when it was built
(`validate_bg.wasm.sha256`). Run from the source tree (`PYTHONPATH=python/src`,
or an editable install): the repository's own `web/pkg/web/validate_bg.wasm`
and `web/pkg/validate_bg.wasm.sha256`. Either way the bytes must have the
recorded SHA-256, or nothing loads.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ._errors import ArtifactError

WASM = "validate_bg.wasm"
SHA = "validate_bg.wasm.sha256"


@dataclass(frozen=True)
class Artifact:
    path: Path
    """The file the bytes were read from."""
    source: str
    """``"package"`` (the installed copy) or ``"repository"`` (web/pkg, in the source tree)."""
    wasm: bytes
    sha256: str
    """Hex SHA-256 of ``wasm`` (equal to the recorded one)."""


def locate() -> tuple:
    """(wasm path, recorded SHA-256 path, source) of the artifact to load."""
    here = Path(__file__).resolve().parent
    if (here / WASM).is_file():
        return here / WASM, here / SHA, "package"
    # python/src/omnigraph_validate -> the repository root
    root = here.parents[2]
    in_tree = root / "web" / "pkg" / "web" / WASM
    if in_tree.is_file():
        return in_tree, root / "web" / "pkg" / SHA, "repository"
    raise ArtifactError(
        f"no validator artifact: neither {here / WASM} (an installed package) nor {in_tree} (the source tree)"
    )


def load() -> Artifact:
    """Reads the artifact and checks it against its recorded SHA-256."""
    path, sha_path, source = locate()
    wasm = path.read_bytes()
    try:
        recorded = sha_path.read_text(encoding="ascii").strip()
    except OSError as e:
        raise ArtifactError(f"the artifact's recorded SHA-256 is missing: {e}") from None
    actual = hashlib.sha256(wasm).hexdigest()
    if actual != recorded:
        raise ArtifactError(f"{path} has SHA-256 {actual}, but {sha_path} records {recorded}")
    return Artifact(path=path, source=source, wasm=wasm, sha256=actual)
