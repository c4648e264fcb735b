"""The package runs the recorded artifact, byte for byte, through the plain ABI."""

import hashlib
import json
from pathlib import Path

import pytest
import wasmtime

import omnigraph_validate as og
from conftest import ROOT

RECORDED = (ROOT / "web" / "pkg" / "validate_bg.wasm.sha256").read_text(encoding="ascii").strip()
WASM = (ROOT / "web" / "pkg" / "web" / "validate_bg.wasm").read_bytes()
EXPECTED_IMPORTS = json.loads((ROOT / "tests" / "wasm-imports.json").read_text(encoding="utf-8"))


def test_the_artifact_has_the_recorded_sha256():
    assert og.artifact_sha256() == RECORDED
    assert hashlib.sha256(Path(og.artifact_path()).read_bytes()).hexdigest() == RECORDED


def test_the_package_runs_its_own_exact_copy_when_installed():
    package_dir = Path(og.__file__).resolve().parent
    in_tree = package_dir == ROOT / "python" / "src" / "omnigraph_validate"
    validator = og.default_validator()
    if in_tree:
        # Run from the source tree: the repository's artifact, nothing copied.
        assert validator.artifact_source == "repository"
        assert Path(og.artifact_path()) == ROOT / "web" / "pkg" / "web" / "validate_bg.wasm"
        assert not (package_dir / "validate_bg.wasm").exists(), "no duplicate of the wasm in python/src"
    else:
        # Installed: the copy the build put into the package, identical to web/pkg.
        assert validator.artifact_source == "package"
        assert Path(og.artifact_path()) == package_dir / "validate_bg.wasm"
        assert (package_dir / "validate_bg.wasm").read_bytes() == WASM
        assert (package_dir / "validate_bg.wasm.sha256").read_text(encoding="ascii").strip() == RECORDED
    assert hashlib.sha256(WASM).hexdigest() == RECORDED
    assert (ROOT / "web" / "pkg" / "nodejs" / "validate_bg.wasm").read_bytes() == WASM


def test_abi_version():
    assert og.abi_version() == og.ABI_VERSION == 4


def test_module_imports_only_the_known_glue():
    # Read from the module independently of the package's runner…
    module = wasmtime.Module(wasmtime.Engine(), WASM)
    kinds = {wasmtime.FuncType: "function", wasmtime.TableType: "table", wasmtime.MemoryType: "memory",
             wasmtime.GlobalType: "global"}
    actual = [{"module": i.module, "name": i.name, "kind": kinds.get(type(i.type), "tag")} for i in module.imports]
    assert actual == EXPECTED_IMPORTS
    # …and the runner defined exactly these as traps.
    runner = [{"module": m, "name": n, "kind": k} for (m, n, k) in og.default_validator().imports]
    assert runner == EXPECTED_IMPORTS


def test_glue_imports_are_traps():
    # wasm-bindgen's start function calls the glue import
    # __wbindgen_init_externref_table: in this runner that is a trap.
    validator = og.default_validator()
    with pytest.raises(og.TrapError, match="__wbindgen_init_externref_table"):
        with validator._call_context() as (store, instance):
            instance.exports(store)["__wbindgen_start"](store)
    # The next call gets a fresh instance and is unaffected.
    assert validator.abi_version() == 4


def test_a_module_with_another_abi_is_refused():
    wat = '(module (memory (export "memory") 1) (func (export "og_abi_version") (result i32) i32.const 1))'
    with pytest.raises(og.ArtifactError, match="plain ABI 1"):
        og.Validator(wasmtime.wat2wasm(wat))


def test_a_module_importing_a_memory_is_refused():
    wat = '(module (import "env" "m" (memory 1)) (func (export "og_abi_version") (result i32) i32.const 2))'
    with pytest.raises(og.ArtifactError, match="only functions"):
        og.Validator(wasmtime.wat2wasm(wat))
