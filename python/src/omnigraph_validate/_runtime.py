"""The artifact in wasmtime, through the plain ABI v4 (crates/omnigraph-validate-wasm/src/abi.rs).

As the Rust host does (crates/omnigraph-host/src/validator.rs): the module is
compiled once per `Validator`; every call gets a fresh instance in a fresh
store (so a trap can leave nothing half-updated for the next call), a memory
limit and an epoch deadline. Every import the module has (wasm-bindgen's JS
glue, listed in tests/wasm-imports.json) is defined as a trap: the plain ABI
never calls them.

The ABI: `og_alloc(len) -> ptr` gives an input buffer in the module's memory
(not zeroed: the caller writes all `len` bytes);
`og_validate(schema, options, batch)` (each a pointer and a length) returns
`ptr << 32 | len` of a result buffer whose first byte is the status:
`0` report JSON, `3` schema error JSON, `4` options error message.
`og_compile(schema)` gives `5` and the schema's compiled form, which
`og_validate_compiled(form, options, batch)` takes in place of the source
(`6`: not a form of this module), so a batch does not compile the schema.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Optional, Tuple

import wasmtime

from . import _artifact
from ._errors import (
    AbiError,
    ArtifactError,
    DeadlineExceededError,
    InputTooLargeError,
    MemoryLimitError,
    RunError,
    TrapError,
)

ABI_VERSION = 4
"""The plain ABI this package speaks."""

STATUS_REPORT = ord("0")
STATUS_ACCEPTED = ord("1")
STATUS_REJECTED = ord("2")
STATUS_SCHEMA_ERROR = ord("3")
STATUS_OPTIONS_ERROR = ord("4")
STATUS_COMPILED = ord("5")
STATUS_COMPILED_FORM_ERROR = ord("6")

WASM_PAGE = 64 * 1024
DEFAULT_MEMORY_LIMIT = 1 << 30
"""Linear memory one instance may use (the Rust host's default)."""
DEFAULT_DEADLINE = 30.0
"""Seconds one call may run (the Rust host's default)."""
EPOCH_TICK = 0.01
"""Seconds between epoch ticks while a call runs; deadlines are whole ticks."""


def _i32(value: int) -> int:
    """An unsigned 32-bit value as the signed i32 wasmtime takes."""
    return value - (1 << 32) if value >= 1 << 31 else value


def _u32(value: int) -> int:
    return value & 0xFFFF_FFFF


class _Ticker:
    """Ticks the engine's epoch while at least one call runs (one thread,
    started on the first call, idle between calls)."""

    def __init__(self, engine: wasmtime.Engine):
        self._engine = engine
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "_Ticker":
        with self._cond:
            self._active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="omnigraph-validate-epoch", daemon=True)
                self._thread.start()
            self._cond.notify()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._active -= 1

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._active == 0 and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
            time.sleep(EPOCH_TICK)
            self._engine.increment_epoch()


def _glue_trap(module: str, name: str):
    def trap(*_args: object) -> None:
        raise TrapError(f"the module called its JS glue import {module}::{name}, which the plain ABI never does")

    return trap


class Validator:
    """The artifact compiled once, run on a fresh instance per call.

    Thread-safe: calls from several threads each get their own store and
    instance.
    """

    def __init__(
        self,
        wasm: Optional[bytes] = None,
        *,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        deadline: float = DEFAULT_DEADLINE,
    ):
        """``wasm``: the module's bytes; by default the shipped artifact
        (checked against its recorded SHA-256)."""
        if wasm is None:
            artifact = _artifact.load()
            wasm, self.artifact_sha256, self.artifact_path = artifact.wasm, artifact.sha256, artifact.path
            self.artifact_source = artifact.source
        else:
            import hashlib

            self.artifact_sha256 = hashlib.sha256(wasm).hexdigest()
            self.artifact_path = None
            self.artifact_source = "bytes"
        self.memory_limit = memory_limit
        self.deadline = deadline
        config = wasmtime.Config()
        config.epoch_interruption = True
        try:
            self._engine = wasmtime.Engine(config)
            self._module = wasmtime.Module(self._engine, wasm)
        except wasmtime.WasmtimeError as e:
            raise ArtifactError(f"the artifact does not compile: {e}") from None
        linker = wasmtime.Linker(self._engine)
        self.imports: Tuple[Tuple[str, str, str], ...] = tuple(
            (i.module, i.name, _kind(i.type)) for i in self._module.imports
        )
        """(module, name, kind) of every import, in the module's order."""
        for imported in self._module.imports:
            if not isinstance(imported.type, wasmtime.FuncType):
                raise ArtifactError(
                    f"the artifact imports {imported.module}::{imported.name}, a {_kind(imported.type)}: "
                    "only functions (wasm-bindgen's glue) can be defined as traps"
                )
            linker.define_func(imported.module, imported.name, imported.type, _glue_trap(imported.module, imported.name))
        self._pre = linker.instantiate_pre(self._module)
        self._ticker = _Ticker(self._engine)
        version = self.abi_version()
        if version != ABI_VERSION:
            raise ArtifactError(f"the artifact speaks plain ABI {version}; this package speaks {ABI_VERSION}")

    def close(self) -> None:
        """Stops the epoch thread (the validator is unusable afterwards)."""
        self._ticker.close()

    def abi_version(self) -> int:
        with self._call_context() as (store, instance):
            return _u32(self._export(store, instance, "og_abi_version")(store))

    def call(self, export: str, *buffers: bytes) -> bytes:
        """One ABI call (``og_validate``, ``og_compile``,
        ``og_validate_compiled``, …) on a fresh instance, each buffer passed
        as a pointer and a length: the result buffer, status byte first."""
        size = sum(len(data) for data in buffers)
        # The guest needs the inputs plus working memory: refuse early rather
        # than trap half-way (a guest allocation failure is a trap).
        if size * 2 > self.memory_limit:
            raise InputTooLargeError(
                f"input of {size} bytes does not fit the validator's memory limit of {self.memory_limit} bytes"
            )
        with self._call_context() as (store, instance):
            memory = instance.exports(store).get("memory")
            if not isinstance(memory, wasmtime.Memory):
                raise AbiError("the module exports no memory")
            alloc = self._export(store, instance, "og_alloc")
            run = self._export(store, instance, export)
            pointers = []
            for data in buffers:
                ptr = _u32(alloc(store, _i32(len(data))))
                _write(store, memory, ptr, data)
                pointers += [_i32(ptr), _i32(len(data))]
            packed = run(store, *pointers) & 0xFFFF_FFFF_FFFF_FFFF
            ptr, length = packed >> 32, packed & 0xFFFF_FFFF
            return _read(store, memory, ptr, length)

    # -- internals -----------------------------------------------------

    def _export(self, store: wasmtime.Store, instance: wasmtime.Instance, name: str) -> wasmtime.Func:
        func = instance.exports(store).get(name)
        if not isinstance(func, wasmtime.Func):
            raise AbiError(f"the module does not export the function {name}")
        return func

    def _call_context(self) -> "_CallContext":
        return _CallContext(self)

    def _new_store(self) -> wasmtime.Store:
        store = wasmtime.Store(self._engine)
        store.set_limits(memory_size=self.memory_limit)
        ticks = max(1, -(-int(self.deadline * 1000) // int(EPOCH_TICK * 1000)))
        store.set_epoch_deadline(ticks)
        return store

    def _classify(self, error: BaseException, store: wasmtime.Store, instance: Optional[wasmtime.Instance]) -> RunError:
        if isinstance(error, RunError):
            return error
        code = getattr(error, "trap_code", None) if isinstance(error, wasmtime.Trap) else None
        if code == wasmtime.TrapCode.INTERRUPT:
            return DeadlineExceededError(f"validation exceeded its deadline of {self.deadline} s")
        if code == wasmtime.TrapCode.UNREACHABLE and instance is not None:
            # Rust aborts with `unreachable` when an allocation fails: near
            # the limit, that is the memory limit.
            memory = instance.exports(store).get("memory")
            used = memory.size(store) * WASM_PAGE if isinstance(memory, wasmtime.Memory) else 0
            if used + 64 * WASM_PAGE >= self.memory_limit:
                return MemoryLimitError(f"validation exceeded its memory limit of {self.memory_limit} bytes")
        if isinstance(error, wasmtime.Trap):
            return TrapError(f"the validator trapped: {error}")
        return RunError(f"running the validator failed: {error}")


class _CallContext:
    """A fresh store and instance for one call; the store is closed after it."""

    def __init__(self, validator: Validator):
        self._validator = validator
        self._store: Optional[wasmtime.Store] = None
        self._instance: Optional[wasmtime.Instance] = None

    def __enter__(self) -> Tuple[wasmtime.Store, wasmtime.Instance]:
        v = self._validator
        v._ticker.__enter__()
        try:
            self._store = v._new_store()
            self._instance = v._pre.instantiate(self._store)
        except BaseException as e:
            self._cleanup()
            if isinstance(e, (wasmtime.Trap, wasmtime.WasmtimeError)):
                raise RunError(f"the validator could not be instantiated: {e}") from None
            raise
        return self._store, self._instance

    def __exit__(self, kind, error, _tb) -> bool:
        try:
            if isinstance(error, (wasmtime.Trap, wasmtime.WasmtimeError)) or (
                error is not None and isinstance(error, TrapError)
            ):
                assert self._store is not None
                raise self._validator._classify(error, self._store, self._instance) from None
            return False
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        self._validator._ticker.__exit__(None, None, None)
        if self._store is not None:
            self._instance = None
            self._store.close()
            self._store = None


def _kind(ty: object) -> str:
    if isinstance(ty, wasmtime.FuncType):
        return "function"
    if isinstance(ty, wasmtime.TableType):
        return "table"
    if isinstance(ty, wasmtime.MemoryType):
        return "memory"
    if isinstance(ty, wasmtime.GlobalType):
        return "global"
    return "tag"


def _write(store: wasmtime.Store, memory: wasmtime.Memory, ptr: int, data: bytes) -> None:
    if not data:
        return
    if ptr + len(data) > memory.data_len(store):
        raise AbiError("og_alloc gave a buffer outside memory")
    base = ctypes.cast(memory.data_ptr(store), ctypes.c_void_p).value or 0
    ctypes.memmove(base + ptr, data, len(data))


def _read(store: wasmtime.Store, memory: wasmtime.Memory, ptr: int, length: int) -> bytes:
    if ptr + length > memory.data_len(store):
        raise AbiError("result buffer outside memory")
    if length == 0:
        return b""
    base = ctypes.cast(memory.data_ptr(store), ctypes.c_void_p).value or 0
    return ctypes.string_at(base + ptr, length)
