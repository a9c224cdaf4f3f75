"""Where the rows of a quoted format (CSV, TSV) end, in bytes.

A quoted field may hold line ends, so the first b"\\n" past a partition's
byte offset may lie inside a row: cut there, the row would be read as two
pieces, its start by one partition and its rest, as rows of its own (with
invented labels), by the next. Whether a newline ends a row depends on the
quote state before it, which the bytes before it decide. A reader past a
file's start does not read them all: it runs the quote automaton below from
each of its states over a window of bytes before the cut (:data:`LOOKBACK`,
then :data:`LOOKBACK_MAX` if they have not agreed); once the runs agree, the
state is known whatever came before (the automaton is deterministic), and in
text with quotes they agree within a row or two. Where they never agree (no
quoted field closes in the window: only a quoted field longer than it could
still be open) the newline rule holds. The two partitions beside a cut
decide it by this same function of the same bytes, so each row is read
once, by the partition where it starts. A quoted field longer than the
window that holds line ends and spans a cut could make a cut land before
the one ahead of it; the partition between them sees its start past its end
and stops the run in words (readers/__init__.py) rather than read rows twice.

A compressed file is read as one stream in pieces, each cut after its last
row end (:func:`last_row_end`); each piece then starts where a row does.

A row ends at an unquoted b"\\n", b"\\r\\n" or lone b"\\r" (classic Mac files,
some spreadsheet exports), as Arrow's parser and pandas end it: a cut after a
lone b"\\r" is a row start as one after b"\\n" is. A block is then read with
its lone b"\\r" row ends as b"\\n" (:func:`with_lf_row_ends`, the same length,
so offsets hold), so what follows (header, blank lines, unclosed quotes)
knows one line end.

A quoted field that never ends within :data:`MAX_ROW` bytes is cut at a
newline as before: the parser then finds the unclosed quote and counts its
row as malformed (readers/csv.py), rather than a reader holding the file.

The same automaton splits a block into its records (:func:`records`), which a
reader reads each on its own: so a row is the same whichever partition reads
it. It marks a stray quote's record (a field whose quote took the lines after
it and was then "closed" by a quote with text behind it, which no well-formed
row holds) and one whose quote is never closed, for the reader to re-read.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# The quote automaton's states, as Arrow's CSV parser reads a row: at a
# field's start, inside a field without quotes (a quote there is text),
# inside quotes, just after a quote inside quotes (it closes the field, or a
# second one makes a quote of text).
FIELD, BARE, QUOTED, CLOSING = 0, 1, 2, 3
NEWLINE = 10
CR = 13
LOOKBACK = 64 * 1024
LOOKBACK_MAX = 2**20
PIECE = 64 * 1024
MAX_ROW = 16 * 2**20


@njit(cache=True, nogil=True)
def _step(state: int, c: int, delim: int, quote: int) -> int:
    if state == QUOTED:
        return CLOSING if c == quote else QUOTED
    if c == NEWLINE or c == CR or c == delim:
        return FIELD
    if c == quote and (state == FIELD or state == CLOSING):
        return QUOTED
    return BARE


@njit(cache=True, nogil=True)
def state_after(data: np.ndarray, state: int, delim: int, quote: int) -> int:
    """The quote state after ``data``, starting in ``state``."""
    for i in range(data.shape[0]):
        state = _step(state, data[i], delim, quote)
    return state


@njit(cache=True, nogil=True)
def agreed_state(data: np.ndarray, delim: int, quote: int) -> int:
    """The quote state after ``data`` whatever the state before it, or -1
    when the runs from the four states do not agree by its end."""
    a, b, c, d = FIELD, BARE, QUOTED, CLOSING
    for i in range(data.shape[0]):
        x = data[i]
        a = _step(a, x, delim, quote)
        b = _step(b, x, delim, quote)
        c = _step(c, x, delim, quote)
        d = _step(d, x, delim, quote)
        if a == b and a == c and a == d:
            return state_after(data[i + 1:], a, delim, quote)
    return -1


@njit(cache=True, nogil=True)
def _ends_row(data: np.ndarray, i: int, state: int) -> bool:
    """Whether byte ``i`` of ``data``, read in ``state``, is a row's last: an
    unquoted b"\\n", or a lone b"\\r" (one at the end of ``data`` counts: the
    caller gives the byte after it where there is one)."""
    if state == QUOTED:
        return False
    c = data[i]
    return c == NEWLINE or (c == CR and (i + 1 == data.shape[0] or data[i + 1] != NEWLINE))


@njit(cache=True, nogil=True)
def first_row_end(data: np.ndarray, state: int, delim: int, quote: int) -> tuple[int, int]:
    """The index of the first byte of ``data`` that ends a row, starting in
    ``state`` (-1 if none), and the state after ``data`` when there is none."""
    for i in range(data.shape[0]):
        if _ends_row(data, i, state):
            return i, FIELD
        state = _step(state, data[i], delim, quote)
    return -1, state


@njit(cache=True, nogil=True)
def last_row_end(data: np.ndarray, delim: int, quote: int) -> int:
    """The index of the last byte of ``data`` that ends a row, ``data``
    starting where a row does (-1 if none). A b"\\r" that ends ``data`` is
    left undecided (a b"\\n" may follow in the next piece)."""
    state = FIELD
    last = -1
    for i in range(data.shape[0] - 1):
        if _ends_row(data, i, state):
            last = i
        state = _step(state, data[i], delim, quote)
    n = data.shape[0]
    if n and data[n - 1] == NEWLINE and state != QUOTED:
        last = n - 1
    return last


@njit(cache=True, nogil=True)
def _lone_crs(data: np.ndarray, delim: int, quote: int) -> list:
    """Where ``data`` (starting where a row does) has a lone b"\\r" that ends a row
    (a list: a CRLF file has none, and a mask would double a block's memory)."""
    out = [np.int64(0)][:0]
    state = FIELD
    for i in range(data.shape[0]):
        if data[i] == CR and _ends_row(data, i, state):
            out.append(np.int64(i))
        state = _step(state, data[i], delim, quote)
    return out


def with_lf_row_ends(data: bytes, delimiter: str, quote: str = '"') -> bytes:
    """``data`` (starting where a row does) with each lone b"\\r" that ends a
    row as b"\\n": the same rows, the same length; a b"\\r" inside quotes stays."""
    if b"\r" not in data:
        return data
    lone = _lone_crs(np.frombuffer(data, np.uint8), ord(delimiter), ord(quote))
    if not len(lone):
        return data
    out = np.frombuffer(data, np.uint8).copy()
    out[np.asarray(lone, np.int64)] = NEWLINE
    return out.tobytes()


@njit(cache=True, nogil=True)
def row_starts_with(data: np.ndarray, mark: np.ndarray, delim: int, quote: int) -> list:
    """The offsets past the first byte of ``data`` (starting where a row does) where a
    row starts with the bytes ``mark``: after a row end, not after a line end inside quotes."""
    out = [np.int64(0)][:0]
    n, m = data.shape[0], mark.shape[0]
    state = FIELD
    for i in range(n):
        if _ends_row(data, i, state) and i + 1 + m <= n:
            j = 0
            while j < m and data[i + 1 + j] == mark[j]:
                j += 1
            if j == m:
                out.append(np.int64(i + 1))
        state = FIELD if _ends_row(data, i, state) else _step(state, data[i], delim, quote)
    return out


# What :func:`records` says of a record besides where it ends.
WHOLE, STRAY, UNCLOSED = 0, 1, 2


@njit(cache=True, nogil=True)
def records(data: np.ndarray, delim: int, quote: int, every: bool) -> tuple[list, list, list]:
    """The records of ``data`` (starting where a row does), as the quote
    automaton reads them, which is where a cut puts a row start
    (:func:`row_start`): their start and end offsets and a kind each, WHOLE,
    STRAY (a quoted field that took line ends was "closed" by a quote with text
    behind it, which no well-formed row holds) or UNCLOSED (a quote still open
    where ``data`` ends). Without ``every``, the STRAY and UNCLOSED ones only:
    a clean block lists none. A record is read on its own, so what it holds
    never depends on the records around it, nor on where a partition starts."""
    starts, ends, kinds = [np.int64(0)][:0], [np.int64(0)][:0], [np.int64(0)][:0]
    n = data.shape[0]
    state, start, spans, stray = FIELD, 0, False, False
    for i in range(n):
        c = data[i]
        if state == FIELD and c == quote:
            spans = False
        elif state == QUOTED and (c == NEWLINE or c == CR):
            spans = True
        elif state == CLOSING and spans and c != quote and c != delim and c != NEWLINE and c != CR:
            stray = True
        if _ends_row(data, i, state):
            if every or stray:
                starts.append(np.int64(start))
                ends.append(np.int64(i + 1))
                kinds.append(np.int64(STRAY if stray else WHOLE))
            state, start, spans, stray = FIELD, i + 1, False, False
            continue
        state = _step(state, c, delim, quote)
    if start < n:
        kind = UNCLOSED if state == QUOTED else (STRAY if stray else WHOLE)
        if every or kind != WHOLE:
            starts.append(np.int64(start))
            ends.append(np.int64(n))
            kinds.append(np.int64(kind))
    return starts, ends, kinds


@njit(cache=True, nogil=True)
def _blank_record(data: np.ndarray, start: int, end: int, delim: int) -> bool:
    """Whether bytes ``start:end`` are spaces and line ends alone (and in CSV tabs)."""
    for j in range(start, end):
        c = data[j]
        if c != 32 and c != NEWLINE and c != CR and (c != 9 or delim == 9):
            return False
    return True


@njit(cache=True, nogil=True)
def misfit_records(data: np.ndarray, delim: int, quote: int, width: int, spanning: bool) -> tuple[list, list]:
    """The records of ``data`` (starting where a row does) that hold more than
    ``width`` fields (a short one reads with its missing fields empty,
    :func:`padded_short_records`): their start and end offsets.
    With ``spanning``, only those whose quoted field took a line end: the lines
    after their first are rows to read again (readers/csv.py), which a parser of
    the whole block cannot do in place."""
    starts, ends = [np.int64(0)][:0], [np.int64(0)][:0]
    n = data.shape[0]
    state, start, spans, fields = FIELD, 0, False, np.int64(1)
    for i in range(n):
        c = data[i]
        if state == QUOTED:
            if c == NEWLINE or c == CR:
                spans = True
        elif c == delim:
            fields += 1
        if _ends_row(data, i, state):
            if fields > width and (spans or not spanning):
                starts.append(np.int64(start))
                ends.append(np.int64(i + 1))
            state, start, spans, fields = FIELD, i + 1, False, np.int64(1)
            continue
        state = _step(state, c, delim, quote)
    if start < n and fields > width and (spans or not spanning):
        starts.append(np.int64(start))
        ends.append(np.int64(n))
    return starts, ends


@njit(cache=True, nogil=True)
def _pad_short(data: np.ndarray, delim: int, quote: int, width: int, out: np.ndarray) -> int:
    """The bytes of :func:`padded_short_records` written into ``out`` (an empty
    one: counted alone), and how many there are."""
    n, write = data.shape[0], out.shape[0] > 0
    state, start, fields, k = FIELD, 0, 1, 0
    for i in range(n + 1):
        last = i == n
        if not last and not _ends_row(data, i, state):
            if state != QUOTED and data[i] == delim:
                fields += 1
            state = _step(state, data[i], delim, quote)
            continue
        stop = n if last else i + 1
        # The delimiters go before "\r\n" as before "\n": a field does not end in the "\r".
        end = i - 1 if not last and data[i] == NEWLINE and i > start and data[i - 1] == CR else i
        pad = width - fields if fields < width and end > start and not _blank_record(data, start, stop, delim) else 0
        if write:
            out[k:k + end - start] = data[start:end]
            out[k + end - start:k + end - start + pad] = delim
            out[k + end - start + pad:k + stop - start + pad] = data[end:stop]
        k += stop - start + pad
        state, start, fields = FIELD, i + 1, 1
    return k


def padded_short_records(data: np.ndarray, delim: int, quote: int, width: int) -> np.ndarray:
    """``data`` (starting where a row does, no stray or unclosed quote in it)
    with delimiters added before the line end of each record of fewer than
    ``width`` fields, not blank (:func:`_blank_record`), as many as it lacks: a
    parser then reads its missing fields as empty, as pandas reads them missing."""
    out = np.empty(_pad_short(data, delim, quote, width, np.empty(0, np.uint8)), np.uint8)
    _pad_short(data, delim, quote, width, out)
    return out


def _bytes(b: bytes) -> np.ndarray:
    return np.frombuffer(b, np.uint8)


def row_start(f, offset: int, size: int, delimiter: str, quote: str) -> int:
    """Where the first row starting at or after byte ``offset`` of the open
    file ``f`` (of ``size`` bytes) starts: just past the first newline at or
    after ``offset`` that ends a row (``size`` if none). The partitions on
    both sides of ``offset`` call this alike: one ends there, the other starts."""
    if offset <= 0:
        return 0
    if offset >= size:
        return size
    d, q = ord(delimiter), ord(quote)
    state = -1
    for back in (LOOKBACK, LOOKBACK_MAX):
        lo = max(0, offset - back)
        f.seek(lo)
        raw = f.read(offset - lo)
        if lo == 0:
            state = state_after(_bytes(raw), FIELD, d, q)
        elif quote.encode() not in raw:   # the run from inside quotes stays there: no agreement to find
            state = -1
        else:
            state = agreed_state(_bytes(raw), d, q)
        if state >= 0 or lo == 0:
            break
    if state < 0:   # no quoted field closes in the window: a newline ends a row (see the module's note)
        state = FIELD
    at = offset
    f.seek(offset)
    while at < size:
        piece = f.read(PIECE)
        if not piece:
            break
        if piece.endswith(b"\r"):   # whether it is a lone one, the next byte says
            piece += f.read(1)
        i, state = first_row_end(_bytes(piece), state, d, q)
        if i >= 0:
            return at + i + 1
        at += len(piece)
        if at - offset > MAX_ROW:   # a quote never closed: the newline rule, the parser counts the row
            return _first_newline(f, offset, size)
    return size


def line_start(f, offset: int, size: int) -> int:
    """:func:`row_start` of a line format where a lone b"\\r" ends a line as b"\\n" does
    (plain text): just past the first line end at or after ``offset``, quotes aside."""
    if offset <= 0:
        return 0
    return size if offset >= size else _first_newline(f, offset, size)


def _first_newline(f, offset: int, size: int) -> int:
    f.seek(offset)
    at = offset
    while at < size:
        piece = f.read(PIECE)
        if not piece:
            break
        if piece.endswith(b"\r"):
            piece += f.read(1)
        i = _first_line_end(piece)
        if i >= 0:
            return at + i + 1
        at += len(piece)
    return size


def _first_line_end(data: bytes) -> int:
    """The index of the first b"\\n" or lone b"\\r" of ``data`` (-1 if none), quotes aside."""
    nl, cr = data.find(b"\n"), data.find(b"\r")
    if cr < 0 or (0 <= nl < cr):
        return nl
    return cr + 1 if data[cr + 1:cr + 2] == b"\n" else cr


def stream_cut(data: bytes, delimiter: str | None, quote: str | None, cr_ends_lines: bool = False) -> int:
    """Where a piece of a stream that starts at a row's start is cut: just past
    its last row end (for a line format, its last newline, or with ``cr_ends_lines``
    its last lone b"\\r" where later); -1 if it has none (the piece is one row so
    far). Past :data:`MAX_ROW` bytes, the last newline."""
    if quote is None or delimiter is None:
        cut = data.rfind(b"\n")
        if cr_ends_lines:   # a b"\\r" that ends the piece is left undecided: a b"\\n" may follow
            cut = max(cut, data.rfind(b"\r", 0, len(data) - 1))
    else:
        cut = last_row_end(_bytes(data), ord(delimiter), ord(quote))
        if cut < 0 and len(data) > MAX_ROW:
            cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1))
    return cut + 1 if cut >= 0 else -1
