"""Build hooks of the omnigraph-validate package (metadata: pyproject.toml).

The package ships the validator artifact, the exact `validate_bg.wasm` that
browsers, Node and the host run. The repository keeps it once, in `web/pkg/`;
nothing under `python/` is a copy. At build time (`pip install ./python`,
which builds in the source tree) `build_py` copies

    web/pkg/web/validate_bg.wasm        -> omnigraph_validate/validate_bg.wasm
    web/pkg/validate_bg.wasm.sha256     -> omnigraph_validate/validate_bg.wasm.sha256

into the wheel, after checking that the bytes have the recorded SHA-256 (a
mismatch fails the build). An sdist carries the two files next to the
sources, so a wheel built from it (outside the repository) gets them too.
"""

import hashlib
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PACKAGE = "omnigraph_validate"
WASM = "validate_bg.wasm"
SHA = "validate_bg.wasm.sha256"
# Where the repository keeps them (python/ is at the repository root).
IN_REPO = {WASM: HERE.parent / "web" / "pkg" / "web" / WASM, SHA: HERE.parent / "web" / "pkg" / SHA}
# Where an sdist keeps them.
IN_SDIST = {name: HERE / "src" / PACKAGE / name for name in (WASM, SHA)}


def artifact_sources():
    """The artifact and its recorded SHA-256, checked against each other."""
    for sources in (IN_REPO, IN_SDIST):
        if all(path.is_file() for path in sources.values()):
            break
    else:
        raise SystemExit(
            f"omnigraph-validate: the validator artifact is missing: expected {IN_REPO[WASM]} "
            f"and {IN_REPO[SHA]} (build from the repository with pip >= 21.3, which builds in the "
            "source tree; scripts/build-wasm.sh makes the artifact)"
        )
    recorded = sources[SHA].read_text(encoding="ascii").strip()
    actual = hashlib.sha256(sources[WASM].read_bytes()).hexdigest()
    if actual != recorded:
        raise SystemExit(
            f"omnigraph-validate: {sources[WASM]} has SHA-256 {actual}, but {sources[SHA]} records {recorded}"
        )
    return sources


class BuildPyWithArtifact(build_py):
    def run(self):
        # pip builds in the source tree: start from an empty package in the
        # build directory, so a module removed from src/ is not shipped.
        shutil.rmtree(Path(self.build_lib) / PACKAGE, ignore_errors=True)
        super().run()
        target = Path(self.build_lib) / PACKAGE
        target.mkdir(parents=True, exist_ok=True)
        for name, source in artifact_sources().items():
            shutil.copyfile(source, target / name)

    def get_outputs(self, include_bytecode=True):
        extra = [str(Path(self.build_lib) / PACKAGE / name) for name in (WASM, SHA)]
        return super().get_outputs(include_bytecode) + extra


class SdistWithArtifact(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        target = Path(base_dir) / "src" / PACKAGE
        for name, source in artifact_sources().items():
            shutil.copyfile(source, target / name)


setup(cmdclass={"build_py": BuildPyWithArtifact, "sdist": SdistWithArtifact})
