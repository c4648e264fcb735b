"""The package's exceptions.

Verdicts on a batch are never exceptions: they are the report (SPEC §3).
Exceptions say that the inputs could not be judged (a bad schema, bad
options, a line longer than one batch) or that running the artifact failed.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List


class ValidatorError(Exception):
    """Base class of every error this package raises."""


class SchemaCompileError(ValidatorError, ValueError):
    """The schema does not compile. ``str(e)`` is the validator's message:
    every error as ``line:column: message``, one per line (as the npm
    package's ``SchemaCompileError.message``)."""

    def __init__(self, errors_json: str):
        self.errors_json: str = errors_json
        """The validator's ``{"errors":[{"line","column","message"}…]}``, as it gave it."""
        self.errors: List[Dict[str, Any]] = json.loads(errors_json)["errors"]
        first = self.errors[0] if self.errors else {}
        self.line: int = first.get("line", 0)
        """Line of the first error (1-based)."""
        self.column: int = first.get("column", 0)
        """Column of the first error (1-based, in characters)."""
        self.message: str = "\n".join(f"{e['line']}:{e['column']}: {e['message']}" for e in self.errors)
        super().__init__(self.message)


class OptionsError(ValidatorError, ValueError):
    """The options do not parse or are out of range (the validator's message,
    ``invalid options: …``)."""


class BatchSplitError(ValidatorError, ValueError):
    """A file cannot be split into batches: one of its lines is longer than
    one batch may hold (the CLI refuses such a file the same way)."""


class ArtifactError(ValidatorError):
    """The artifact is missing, differs from its recorded SHA-256, speaks
    another ABI, or imports something other than wasm-bindgen's functions."""


class RunError(ValidatorError):
    """Running the artifact failed (never a verdict on the batch)."""


class InputTooLargeError(RunError):
    """Schema plus options plus batch cannot fit the instance's memory limit."""


class DeadlineExceededError(RunError):
    """The call ran past its deadline."""


class MemoryLimitError(RunError):
    """The guest ran out of memory under its limit."""


class TrapError(RunError):
    """Any other trap (a bug in the validator, or a call of a glue import)."""


class AbiError(RunError):
    """The module answered outside the plain ABI."""
