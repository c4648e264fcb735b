"""The OmniGraph ingest validator in Python.

Runs the one validator artifact, the same ``validate_bg.wasm`` bytes that
browsers, Node and the commit host run, in wasmtime through the module's
plain ABI v4, so a batch gets the byte-identical report (SPEC §3) here too::

    import omnigraph_validate as og
    schema = og.compile_schema(open("samples/people.pg").read())
    report = schema.validate(open("samples/people.ndjson", "rb").read())   # {"ok": True, ...}

Every call runs on a fresh wasm instance of the module compiled once per
process (see ``Validator``).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from ._errors import (
    AbiError,
    ArtifactError,
    BatchSplitError,
    DeadlineExceededError,
    InputTooLargeError,
    MemoryLimitError,
    OptionsError,
    RunError,
    SchemaCompileError,
    TrapError,
    ValidatorError,
)
from ._files import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_ROWS,
    BatchResult,
    FileReport,
    combine,
    is_edge_record,
    iter_file as _iter_file,
    probe_line,
)
from ._runtime import (
    ABI_VERSION,
    STATUS_COMPILED,
    STATUS_COMPILED_FORM_ERROR,
    STATUS_OPTIONS_ERROR,
    STATUS_REPORT,
    STATUS_SCHEMA_ERROR,
    Validator,
)

__version__ = "0.1.0"

__all__ = [
    "ABI_VERSION",
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_ROWS",
    "AbiError",
    "ArtifactError",
    "BatchResult",
    "BatchSplitError",
    "CompiledSchema",
    "DeadlineExceededError",
    "FileReport",
    "InputTooLargeError",
    "MemoryLimitError",
    "OptionsError",
    "RunError",
    "SchemaCompileError",
    "TrapError",
    "Validator",
    "ValidatorError",
    "abi_version",
    "artifact_path",
    "artifact_sha256",
    "compile_schema",
    "default_validator",
    "is_edge_record",
    "probe_line",
    "validate",
]

Options = Union[None, Mapping[str, Any], str, bytes]
"""Validator options (SPEC §5, ``{"mode", "strict", "max_errors", "limits",
"legacy_identity"}``): a dict, or options JSON as text or bytes; ``None`` (or
empty) = the defaults."""

_default: Optional[Validator] = None
_default_lock = threading.Lock()


def default_validator() -> Validator:
    """The process's validator on the shipped artifact (compiled on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Validator()
        return _default


def artifact_sha256() -> str:
    """Hex SHA-256 of the artifact this package runs (what the host's
    ``/rules`` reports as the validator's SHA-256)."""
    return default_validator().artifact_sha256


def artifact_path() -> Optional[str]:
    """The file the artifact was read from: the package's copy when installed,
    ``web/pkg/web/validate_bg.wasm`` when run from the source tree."""
    path = default_validator().artifact_path
    return None if path is None else str(path)


def abi_version() -> int:
    """The artifact's plain ABI version (``og_abi_version``; 4)."""
    return default_validator().abi_version()


def _options_bytes(options: Options) -> bytes:
    if options is None:
        return b""
    if isinstance(options, bytes):
        return options
    if isinstance(options, str):
        return options.encode("utf-8")
    if isinstance(options, Mapping):
        return json.dumps(dict(options), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raise TypeError(f"options must be a dict, JSON text or bytes, not {type(options).__name__}")


def _batch_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        raise TypeError("a batch is bytes, as the validator reads them: pass text.encode('utf-8')")
    raise TypeError(f"a batch is bytes, not {type(data).__name__}")


def _status_and_body(out: bytes) -> Tuple[int, bytes]:
    if not out:
        raise AbiError("empty result")
    return out[0], out[1:]


def _run_validate(validator: Validator, export: str, schema: bytes, options: bytes, batch: bytes) -> str:
    """``og_validate`` (``schema``: source) or ``og_validate_compiled``
    (``schema``: a compiled form): the report JSON."""
    status, body = _status_and_body(validator.call(export, schema, options, batch))
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise AbiError("result is not UTF-8") from None
    if status == STATUS_REPORT:
        return text
    if status == STATUS_SCHEMA_ERROR:
        raise SchemaCompileError(text)
    if status == STATUS_OPTIONS_ERROR:
        raise OptionsError(text)
    if status == STATUS_COMPILED_FORM_ERROR:
        raise AbiError(f"the artifact refused its own compiled schema: {text}")
    raise AbiError(f"unexpected status byte {status}")


class CompiledSchema:
    """A schema that compiles, ready to validate batches with.

    The artifact compiled it once (``og_compile``); every call is a fresh
    instance, as in the host, handed that compiled form
    (``og_validate_compiled``), so no batch compiles the schema again.
    """

    def __init__(self, source: str, validator: Validator, schema_hash: str, validator_version: str, form: bytes):
        self.source = source
        self.validator = validator
        self.hash = schema_hash
        """``sha256:…`` of the canonical catalog (SPEC §1.5), as reports give it."""
        self.validator_version = validator_version
        """The rule book's version, as reports give it (``rules.validator``)."""
        self._form = form

    def __repr__(self) -> str:
        return f"CompiledSchema(hash={self.hash!r})"

    def validate_json(self, data: Any, options: Options = None) -> str:
        """The report JSON (SPEC §3), exactly as every runtime gives it (no
        trailing newline). Raises ``OptionsError`` for bad options."""
        return _run_validate(self.validator, "og_validate_compiled", self._form, _options_bytes(options), _batch_bytes(data))

    def validate(self, data: Any, options: Options = None) -> Dict[str, Any]:
        """The report (SPEC §3) as a dict. ``data``: the batch's bytes."""
        return json.loads(self.validate_json(data, options))

    def iter_file(
        self,
        path: Union[str, "os.PathLike[str]"],
        options: Options = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        split_on_bounds: bool = True,
    ) -> Iterator[BatchResult]:
        """Validates a file batch by batch, streaming (memory is one batch),
        yielding each ``BatchResult`` as it is done. See ``validate_file``."""
        options_bytes = _options_bytes(options)
        batch_rows, batch_bytes = _clamp_bounds(options_bytes, batch_rows, batch_bytes)
        # Options are checked once, before the file is read.
        self.validate_json(b"", options_bytes)
        return _iter_file(
            lambda batch: _run_validate(self.validator, "og_validate_compiled", self._form, options_bytes, batch),
            os.fspath(path),
            batch_rows,
            batch_bytes,
            split_on_bounds,
        )

    def validate_file(
        self,
        path: Union[str, "os.PathLike[str]"],
        options: Options = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        split_on_bounds: bool = True,
    ) -> FileReport:
        """Validates a file of any size in the batches the CLI's ``load``
        would send: one batch if it fits (at most ``batch_bytes`` bytes and
        ``batch_rows`` records of each type, however many lines in all; the
        defaults are the CLI's, 32 MiB and 8,192,
        clamped like the CLI to the options' ``max_batch_bytes`` and
        ``max_table_rows``), else node records first and edge records after,
        each in file order, at line boundaries, each batch within the same
        bounds; a batch refused for a bound
        a smaller batch may fit is halved (``split_on_bounds``).

        Returns a ``FileReport``: each batch's exact report, and every error
        and external reference with its ``file_line`` and ``file_offset``.
        Raises ``BatchSplitError`` if a line is longer than ``batch_bytes``.
        """
        return combine(os.fspath(path), self.iter_file(path, options, batch_bytes, batch_rows, split_on_bounds))


def _clamp_bounds(options: bytes, batch_rows: int, batch_bytes: int) -> tuple:
    """The CLI clamps its batch bounds to the validator's bounds."""
    max_rows, max_bytes = DEFAULT_BATCH_ROWS, DEFAULT_BATCH_BYTES
    try:
        limits = json.loads(options)["limits"] if options else {}
        max_rows = int(limits.get("max_table_rows", max_rows))
        max_bytes = int(limits.get("max_batch_bytes", max_bytes))
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return min(max(1, batch_rows), max(1, max_rows)), min(max(1, batch_bytes), max(1, max_bytes))


def compile_schema(source: str, validator: Optional[Validator] = None) -> CompiledSchema:
    """Compiles ``.pg`` source in the artifact; raises ``SchemaCompileError``
    (with the validator's message, line and column) if it does not compile."""
    if not isinstance(source, str):
        raise TypeError(f"schema source is text, not {type(source).__name__}")
    validator = validator or default_validator()
    status, body = _status_and_body(validator.call("og_compile", source.encode("utf-8")))
    if status == STATUS_SCHEMA_ERROR:
        raise SchemaCompileError(body.decode("utf-8", "replace"))
    if status != STATUS_COMPILED:
        raise AbiError(f"og_compile answered status byte {status}")
    # The hash and version, as reports give them: the report of no records.
    rules = json.loads(_run_validate(validator, "og_validate_compiled", body, b"", b""))["rules"]
    return CompiledSchema(source, validator, rules["schema_hash"], rules["validator"], body)


def validate(schema: str, data: Any, options: Options = None) -> Dict[str, Any]:
    """One-shot: compile ``schema`` and validate ``data``; the report as a dict."""
    validator = default_validator()
    return json.loads(_run_validate(validator, "og_validate", schema.encode("utf-8"), _options_bytes(options), _batch_bytes(data)))
