"""Validating a file larger than one batch, split as the CLI's `load` splits it
(crates/omnigraph-host/src/split.rs, SPEC §5, §7).

The file is streamed; memory is one batch. A file that fits one batch (at
most `batch_bytes` bytes and `batch_lines` lines) is one batch, as it is. A
larger one, or one that the validator refuses as one batch for a bound a
smaller batch may fit, is split at line boundaries in two passes: node
records (and every line that is no edge record, so the validator still
reports it) first, then edge records, each pass in file order, each batch at
most `batch_lines` lines and `batch_bytes` bytes. A batch refused for such a
bound is halved until it fits or is one line (as `load` does). So the
batches are the ones `load` would send; unlike `load`, which stops at the
first refused batch, every batch is validated.

Each batch's report is the validator's, numbering the batch's own lines
(messages say "line N" of the batch). The combined `FileReport.errors` and
`FileReport.external_refs` add to each entry the batch index and, where the
entry names a line, its `file_line` and `file_offset` (the line's start in
the file). Checks across batches (duplicate ids or `@unique` tuples in two
batches, edges whose endpoints are in another batch, which are listed as
external references) are the host's, as for a split load.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ._errors import BatchSplitError

DEFAULT_BATCH_LINES = 8_192
"""At most this many lines per batch (the CLI's `--batch-lines`; the rows-per-table bound)."""
DEFAULT_BATCH_BYTES = 32 * 1024 * 1024
"""At most this many bytes per batch (the CLI's `--batch-bytes`; the batch bytes bound)."""

SPLITTABLE_BOUNDS = ("batch_bytes_limit", "table_rows_limit", "table_bytes_limit", "json_too_complex", "line_too_long")
"""Bounds a smaller batch may fit (the CLI splits and retries on these)."""


@dataclass
class BatchResult:
    """One batch of a file and its report."""

    index: int
    """0-based position among the file's batches, in the order validated."""
    phase: str
    """``"all"`` (the whole file, one batch), ``"nodes"`` or ``"edges"`` (a pass of the split)."""
    start: int
    """Byte range ``[start, end)`` of the file the batch covers (a pass's
    batch skips the other pass's lines in it)."""
    end: int
    lines: List[Tuple[int, int]]
    """Per batch line: its file line number (1-based) and the file offset of its start."""
    report_json: str
    """The validator's report, byte for byte."""
    report: Dict[str, Any] = field(repr=False)

    @property
    def ok(self) -> bool:
        return bool(self.report["ok"])

    @property
    def first_line(self) -> int:
        """The file line of the batch's first line."""
        return self.lines[0][0] if self.lines else 0

    def file_line(self, batch_line: int) -> Optional[int]:
        """The file line of the batch's line ``batch_line`` (1-based), as
        reports number them; ``None`` for 0 (an error of the whole batch)."""
        if 1 <= batch_line <= len(self.lines):
            return self.lines[batch_line - 1][0]
        return None

    def file_offset(self, batch_line: int) -> Optional[int]:
        if 1 <= batch_line <= len(self.lines):
            return self.lines[batch_line - 1][1]
        return None


@dataclass
class FileReport:
    """The reports of a file's batches and their errors in file lines."""

    path: str
    batches: List[BatchResult]
    """Each batch with its report (the ``lines`` map is kept for each)."""
    errors: List[Dict[str, Any]]
    """Every listed error of every batch, sorted by file line (a stable sort:
    within a line, the validator's order): the report's entry plus ``batch``
    (index), ``file_line`` and ``file_offset`` (``None`` for an error of a
    whole batch, line 0). ``line``, ``offset`` and ``message`` stay as the
    validator gave them (batch-relative)."""
    external_refs: List[Dict[str, Any]]
    """Every batch's external references, with ``batch`` and ``file_line``, sorted by file line."""

    @property
    def ok(self) -> bool:
        """Whether every batch is valid."""
        return all(b.ok for b in self.batches)

    @property
    def error_count(self) -> int:
        """All errors counted by the batches (listed or not)."""
        return sum(int(b.report.get("error_count", len(b.report["errors"]))) for b in self.batches)

    @property
    def errors_truncated(self) -> bool:
        return any(bool(b.report.get("errors_truncated")) for b in self.batches)

    @property
    def records(self) -> int:
        return sum(int(b.report["stats"]["records"]) for b in self.batches)

    def error_lines(self, name: Optional[str] = None) -> List[str]:
        """The errors as the CLI prints them, ``FILE:LINE: code: message``,
        with file line numbers (``FILE: batch N: …`` for a whole-batch error)."""
        name = self.path if name is None else name
        out = []
        for e in self.errors:
            where = f"{name}:{e['file_line']}" if e["file_line"] is not None else f"{name}: batch {e['batch']}"
            out.append(f"{where}: {e['code']}: {e['message']}")
        return out


@dataclass
class _Batch:
    phase: str
    start: int
    end: int = 0
    data: bytearray = field(default_factory=bytearray)
    lines: List[Tuple[int, int]] = field(default_factory=list)
    line_ends: List[int] = field(default_factory=list)

    def add(self, line: bytes, line_no: int, offset: int) -> None:
        self.data += line
        self.line_ends.append(len(self.data))
        self.lines.append((line_no, offset))

    def halves(self) -> Optional[Tuple["_Batch", "_Batch"]]:
        """Two halves covering the same range (split.rs `Batch::halves`)."""
        if len(self.lines) < 2:
            return None
        mid = len(self.lines) // 2
        cut = self.line_ends[mid - 1]
        middle = self.lines[mid][1]
        first = _Batch(self.phase, self.start, middle, self.data[:cut], self.lines[:mid], self.line_ends[:mid])
        second = _Batch(
            self.phase, middle, self.end, self.data[cut:], self.lines[mid:], [e - cut for e in self.line_ends[mid:]]
        )
        return first, second


def _lines(path: str, max_bytes: int) -> Iterator[Tuple[int, int, bytes]]:
    """(file line number, offset, line with its LF) of every line, streamed."""
    with open(path, "rb") as f:
        offset = 0
        line_no = 0
        while True:
            line = f.readline(max_bytes + 1)
            if not line:
                return
            if len(line) > max_bytes:
                raise BatchSplitError(
                    f"line {line_no + 1} (at byte {offset}) is longer than one batch may hold ({max_bytes} bytes)"
                )
            line_no += 1
            yield line_no, offset, line
            offset += len(line)


class _Pairs(list):
    """A JSON object as its members, in order (duplicates kept)."""


def _probe_string(value: Any) -> Tuple[bool, Optional[str]]:
    """(parses as Option<str>, the string)."""
    if value is None:
        return True, None
    if isinstance(value, str):
        return True, value
    return False, None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def is_edge_record(line: bytes) -> bool:
    """Whether a line is an edge record: a JSON text that reads as split.rs's
    `Probe { type: Option<str>, edge: Option<str> }` with an `edge` string.
    Anything else, invalid lines included, goes with the nodes. (Lines the
    validator refuses anyway may in rare cases fall in the other pass than
    with the CLI; their errors are still reported, with their file lines.)"""
    stripped = line.lstrip(b" \t\r\n")
    if stripped[:1] == b"{" and b"edge" not in line and b"\\" not in line:
        return False  # no member can be named "edge"
    try:
        value = json.loads(line.decode("utf-8"), object_pairs_hook=_Pairs, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False
    if isinstance(value, _Pairs):
        seen: Dict[str, Any] = {}
        for key, member in value:
            if key in ("type", "edge"):
                if key in seen:
                    return False  # serde: duplicate field
                seen[key] = member
        type_ok, _ = _probe_string(seen.get("type"))
        edge_ok, edge = _probe_string(seen.get("edge"))
        return type_ok and edge_ok and edge is not None
    if isinstance(value, list):
        # serde's derived struct also reads a sequence of its fields in order.
        if len(value) != 2:
            return False
        type_ok, _ = _probe_string(value[0])
        edge_ok, edge = _probe_string(value[1])
        return type_ok and edge_ok and edge is not None
    return False


def _fits_one_batch(path: str, max_lines: int, max_bytes: int) -> bool:
    if os.path.getsize(path) > max_bytes:
        return False
    count = 0
    for _ in _lines(path, max_bytes):
        count += 1
    return count <= max_lines


def _pass(path: str, phase: str, max_lines: int, max_bytes: int) -> Iterator[_Batch]:
    """The batches of one pass, at most ``max_lines`` lines and ``max_bytes`` bytes each."""
    wants_edges = phase == "edges"
    batch = _Batch(phase, 0)
    position = 0
    for line_no, offset, line in _lines(path, max_bytes):
        if phase != "all" and is_edge_record(line) != wants_edges:
            position = offset + len(line)
            continue
        if len(batch.lines) == max_lines or len(batch.data) + len(line) > max_bytes:
            batch.end = offset
            yield batch
            batch = _Batch(phase, offset)
        batch.add(line, line_no, offset)
        position = offset + len(line)
    batch.end = position
    if batch.lines:
        yield batch


def _splittable(report: Dict[str, Any]) -> bool:
    """Refused for a bound a smaller batch may fit (as the CLI decides)."""
    return any("limit" in e and e.get("code") in SPLITTABLE_BOUNDS for e in report.get("errors", ()))


def iter_file(
    validate_json: Callable[[bytes], str],
    path: str,
    batch_lines: int,
    batch_bytes: int,
    split_on_bounds: bool = True,
) -> Iterator[BatchResult]:
    """Validates ``path`` batch by batch (see the module's doc)."""
    path = os.fspath(path)
    index = 0

    def run(batch: _Batch) -> BatchResult:
        report_json = validate_json(bytes(batch.data))
        return BatchResult(
            index=index,
            phase=batch.phase,
            start=batch.start,
            end=batch.end,
            lines=batch.lines,
            report_json=report_json,
            report=json.loads(report_json),
        )

    if _fits_one_batch(path, batch_lines, batch_bytes):
        whole = next(_pass(path, "all", batch_lines, batch_bytes), None)
        if whole is None:  # an empty file: still one (empty) batch and its report
            whole = _Batch("all", 0)
        result = run(whole)
        if not (split_on_bounds and _splittable(result.report)):
            yield result
            return
    for phase in ("nodes", "edges"):
        for batch in _pass(path, phase, batch_lines, batch_bytes):
            pending = [batch]
            while pending:
                current = pending.pop()
                result = run(current)
                halves = current.halves() if split_on_bounds and _splittable(result.report) else None
                if halves is not None:
                    pending += [halves[1], halves[0]]
                    continue
                yield result
                index += 1


def combine(path: str, results: Iterator[BatchResult]) -> FileReport:
    batches: List[BatchResult] = []
    errors: List[Dict[str, Any]] = []
    refs: List[Dict[str, Any]] = []
    for result in results:
        batches.append(result)
        for e in result.report.get("errors", ()):
            line = int(e.get("line", 0))
            errors.append(
                {**e, "batch": result.index, "file_line": result.file_line(line), "file_offset": result.file_offset(line)}
            )
        for r in result.report.get("external_refs", ()):
            refs.append({**r, "batch": result.index, "file_line": result.file_line(int(r.get("line", 0)))})
    # In file order (a split file's edges were validated after its nodes);
    # errors of a whole batch (no line) first, each group as the batches gave them.
    errors.sort(key=lambda e: e["file_line"] or 0)
    refs.sort(key=lambda r: r["file_line"] or 0)
    return FileReport(path=os.fspath(path), batches=batches, errors=errors, external_refs=refs)
