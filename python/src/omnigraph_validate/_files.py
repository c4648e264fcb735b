"""Validating a file larger than one batch, split as the CLI's `load` splits it
(crates/omnigraph-host/src/split.rs, SPEC §5, §7).

The file is streamed; memory is one batch. A file that fits one batch (at
most `batch_bytes` bytes and `batch_rows` records of each type, counted per
table as the bounds count rows) is one batch, as it is, however many lines it
has. A larger one, or one that the validator refuses as one batch for a bound a
smaller batch may fit, is split at line boundaries in two passes: node
records (and every line that is no edge record, so the validator still
reports it; a line's kind and table read by `probe_line`, as split.rs's
`Probe` reads them) first, then edge records, each pass in file order, each batch at
most `batch_rows` records of any one type and `batch_bytes` bytes. A batch refused for such a
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
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ._errors import BatchSplitError

DEFAULT_BATCH_ROWS = 8_192
"""At most this many records of any one type per batch (the CLI's
`--batch-rows`; the rows-per-table bound)."""
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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


_AS_WRITTEN = re.compile(rb'\{"(type|edge)":"([^"]+)"')


def _as_written(line: bytes) -> Optional[Tuple[Optional[str], Optional[str]]]:
    """A record laid out as writers write it, read without parsing it
    (split.rs `Probe::as_written`): ``{"type":"Name",…`` or
    ``{"edge":"Name",…``, no escape in the line, and neither name again
    after ``Name``. ``None`` when the line is not written so."""
    if b"\\" in line:
        return None
    match = _AS_WRITTEN.match(line)
    if match is None:
        return None
    after = line[match.end() - 1 :]  # from the name's closing quote, as split.rs reads it
    if b'"type"' in after or b'"edge"' in after:
        return None
    try:
        name = match.group(2).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (None, name) if match.group(1) == b"edge" else (name, None)


def probe_line(line: bytes) -> Tuple[Optional[str], Optional[str]]:
    """A line's ``(type, edge)`` names as split.rs's `Probe` reads them: a
    JSON text that reads as `Probe { type: Option<str>, edge: Option<str> }`
    (strings or null); any other line names neither. Lines the validator
    refuses anyway may in rare cases be read otherwise than by the CLI;
    their errors are still reported, with their file lines."""
    fast = _as_written(line)
    if fast is not None:
        return fast
    try:
        value = json.loads(line.decode("utf-8"), object_pairs_hook=_Pairs, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None, None
    if isinstance(value, _Pairs):
        seen: Dict[str, Any] = {}
        for key, member in value:
            if key in ("type", "edge"):
                if key in seen:
                    return None, None  # serde: duplicate field
                seen[key] = member
        members = [seen.get("type"), seen.get("edge")]
    elif isinstance(value, list) and len(value) == 2:
        members = value  # serde's derived struct also reads a sequence of its fields in order
    else:
        return None, None
    if not all(member is None or isinstance(member, str) for member in members):
        return None, None
    return members[0], members[1]


def is_edge_record(line: bytes) -> bool:
    """Whether a line is an edge record (an ``edge`` string, `probe_line`).
    Anything else, invalid lines included, goes with the nodes."""
    return probe_line(line)[1] is not None


def _pass(path: str, phase: str, max_rows: int, max_bytes: int) -> Iterator[_Batch]:
    """The batches of one pass: each ends where the next line's table (its
    ``edge``, else its ``type``; a line naming neither counts against none)
    has ``max_rows`` rows in the batch already, or where the bytes would
    pass ``max_bytes``."""
    batch = _Batch(phase, 0)
    rows: Dict[str, int] = {}
    position = 0
    for line_no, offset, line in _lines(path, max_bytes):
        node, edge = probe_line(line)
        if phase != "all" and (edge is not None) != (phase == "edges"):
            position = offset + len(line)
            continue
        table = edge if edge is not None else node
        full = table is not None and rows.get(table, 0) == max_rows
        if full or len(batch.data) + len(line) > max_bytes:
            batch.end = offset
            yield batch
            batch = _Batch(phase, offset)
            rows = {}
        if table is not None:
            rows[table] = rows.get(table, 0) + 1
        batch.add(line, line_no, offset)
        position = offset + len(line)
    batch.end = position
    if batch.lines:
        yield batch


def _whole_file(path: str, max_rows: int, max_bytes: int) -> Optional[_Batch]:
    """The whole file as one batch, if every table fits ``max_rows`` and the
    file ``max_bytes`` (an empty file is one empty batch); else ``None``."""
    if os.path.getsize(path) > max_bytes:
        return None
    batches = _pass(path, "all", max_rows, max_bytes)
    whole = next(batches, None) or _Batch("all", 0)
    return whole if next(batches, None) is None else None


def _splittable(report: Dict[str, Any]) -> bool:
    """Refused for a bound a smaller batch may fit (as the CLI decides)."""
    return any("limit" in e and e.get("code") in SPLITTABLE_BOUNDS for e in report.get("errors", ()))


def iter_file(
    validate_json: Callable[[bytes], str],
    path: str,
    batch_rows: int,
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

    whole = _whole_file(path, batch_rows, batch_bytes)
    if whole is not None:
        result = run(whole)
        if not (split_on_bounds and _splittable(result.report)):
            yield result
            return
    for phase in ("nodes", "edges"):
        for batch in _pass(path, phase, batch_rows, batch_bytes):
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
