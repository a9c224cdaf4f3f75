"""Plain text (a row per line) and fastText (``__label__x text``) lines."""
from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import UserError
from ...formats import Format, Head
from ...options import hinted
from ..sources import Chunk, Columns
from .csv import delimited_header
from .labels import FASTTEXT_SPACE as _SP
from .labels import FASTTEXT_WORD as _W
from .labels import fasttext_sets, several_labels, several_tagged
from .table import BOM, decoded, finish, split_lines, strip_bom, utf8_ok

# A line's leading __label__ tags, then its text; and the first tag's label.
# (Words and tags end where fastText ends them: labels.FASTTEXT_SPACE.)
_FASTTEXT_RE = rf"^(?P<tags>(?:__label__{_W}*{_SP}*)*)(?P<text>.*)$"
_FIRST_LABEL_RE = rf"^__label__(?P<label>{_W}*)"
# A tag after the text's first word: a whitespace-separated token that starts with __label__.
_LATER_TAG_RE = rf"(?:^|{_SP})__label__"
_TAG_TOKEN = re.compile(rf"(?:^|{_SP}+)(__label__{_W}*)")


# A lone "\r" (a classic Mac file's line end) ends a plain text line, as Python's open() and pandas end
# one. Only there: fastText reads it as a space between words, as fastText's own reader does.
_LONE_CR = re.compile(rb"\r(?!\n)")


def lone_crs_as_lf(data: bytes) -> bytes:
    """A block of text lines with each lone ``\\r`` as ``\\n`` (the same length). Partitions
    are cut at both (:func:`~.row_ends.line_start`, the format's ``cr_ends_lines``), so a
    classic Mac file is read in blocks of bounded size, its lines the same whatever the cut."""
    if b"\r" not in data or _LONE_CR.search(data) is None:
        return data
    return _LONE_CR.sub(b"\n", data)


# A lone "\r" before a line's tags: a fastText file of classic Mac line ends, which fastText reads as one line.
_CR_BEFORE_TAG = re.compile(rb"\r(?!\n)[ \t]*__label__")


def check_fasttext_line_ends(data: bytes, url: str, whole: bool = True) -> None:
    """Refuse a fastText block whose lines end in a lone ``\\r``: fastText reads it as a
    space, so the file would be one line, every line's tags that line's labels (a
    multilabel run trained on one row, a prediction written for the whole file). A line
    (to its ``\\n``) ends there where it holds two tags after a lone ``\\r``, or one and its
    last byte, the file's, is a lone ``\\r``: one tag after a ``\\r`` inside a line is a space
    between words, as fastText reads it, and its tag a tag. Decided line by line, so the same
    wherever the file is cut. ``whole``: ``data``'s last line ends with it (a block, not the
    first bytes of a range or stream)."""
    if b"\r" not in data:
        return
    line, seen = -1, 0
    for tag in _CR_BEFORE_TAG.finditer(data):
        start = data.rfind(b"\n", 0, tag.start()) + 1
        seen, line = (seen + 1 if start == line else 1), start
        if seen > 1:
            break
    last = seen == 1 and whole and data.endswith(b"\r") and data.find(b"\n", line) < 0
    if seen > 1 or last:
        raise UserError(f"{url}: its fastText lines end in a lone \\r (classic Mac line ends), which fastText "
                        "reads as a space: the file would be one line holding every line's labels",
                        "convert the line ends first, e.g. tr '\\r' '\\n' < FILE > FILE-unix.ft")


def check_line_columns(url: str, fmt: str, columns: Columns) -> None:
    if columns.target or columns.numeric:
        raise UserError(f"{url}: the {fmt} format has no numeric columns",
                        "use csv, tsv, jsonl or parquet for target and numeric columns")
    other = [c for c in columns.keep if fmt != "fasttext" or c not in FASTTEXT_KEPT]
    if other and fmt == "fasttext":
        raise UserError(f"{url}: the fastText format has no column {other[0]!r} to keep",
                        "keep label (each line's labels), text, or all; or use a table format")
    if other:
        raise UserError(f"{url}: the {fmt} format has no columns to keep",
                        "drop --keep (the text is in the output), or use a table format")
    if fmt == "text" and columns.label:
        raise UserError(f"{url}: the text format has no labels",
                        "use the fasttext format (__label__x text) or a table format for labels")


def parse(data: bytes, header: bytes | None, fmt: str, columns: Columns, url: str) -> Chunk:
    """The registry's reader for text and fastText lines (no header line)."""
    return parse_lines(data, fmt, columns, url)


def parse_lines(data: bytes, fmt: str, columns: Columns, url: str) -> Chunk:
    check_line_columns(url, fmt, columns)
    if fmt == "text":
        data = lone_crs_as_lf(data)
    else:
        check_fasttext_line_ends(data, url)
    status = None
    if columns.all_rows and not utf8_ok(data):
        lines, status = _lines_in_order(strip_bom(data))
        skipped = {"undecodable": pc.sum(pc.is_valid(status)).as_py() or 0}
        undecodable = 0
    else:
        data, skipped = decoded(data)
        undecodable = skipped.get("undecodable", 0)
        lines = split_lines(data)
    lines = pc.utf8_trim_whitespace(lines)
    if BOM in data:
        # A file's BOM that files joined by cat left at a line's start is no text: in fastText it hid the
        # line's tags from the tag patterns (missing_label, "__label__b" trained as a word); in plain text
        # it was a character of the text (a char n-gram, echoed by predict).
        lines = pc.utf8_trim_whitespace(pc.utf8_ltrim(lines, BOM.decode()))
    if status is None and not columns.all_rows:
        # Blank lines are no training rows; prediction writes every line a row (a blank one empty_text),
        # so its output lines up with the input's lines: a text file has no column to join them back on.
        lines = pc.filter(lines, pc.greater(pc.utf8_length(lines), 0))
    n = len(lines)
    if fmt == "text":
        get = {columns.text[0]: lines}
        cols = Columns(text=(columns.text[0],), text_rule=columns.text_rule)
    else:
        get, cols = fasttext_columns(lines, columns, url, data.count(b"__label__"))
    have = None
    if columns.all_rows:
        kept = fmt == "fasttext" and (columns.keep or columns.keep_all)
        cols = Columns(text=cols.text, label=cols.label, all_rows=True, text_rule=columns.text_rule,
                       keep=columns.keep if kept else (), keep_all=bool(kept and columns.keep_all))
        if kept:   # a line's labels are its columns as a table's are: --keep all keeps them beside the text
            get["label"] = kept_labels(lines)
            have = list(FASTTEXT_KEPT)
    return finish(cols, get.__getitem__, n, n + undecodable, skipped, status=status, have=have)


# The columns a fastText line holds, in the line's order: what --keep all keeps.
FASTTEXT_KEPT = ("label", "text")


def kept_labels(lines: pa.Array) -> pa.Array:
    """Each fastText line's labels, every ``__label__`` tag (those after its text too) without
    the prefix, joined by a space as the line lists them (no label holds one); null for a line
    without any. A single-label run reads the first, a multilabel run each."""
    parts = pc.extract_regex(lines, _FASTTEXT_RE)
    tags = _tags_anywhere(parts.field("text"), parts.field("tags"))[1]
    joined = pc.binary_join(fasttext_sets(tags), " ")
    return pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.string()), joined)


def fasttext_columns(lines: pa.Array, columns: Columns, url: str, tagged: int | None = None
                     ) -> tuple[dict, Columns]:
    """fastText lines → the text and label arrays ``finish`` reads, and their columns.

    ``--task multilabel`` takes every ``__label__`` tag of a line as its label
    set; a single-label task refuses a line with several (it would learn the
    first one only). Prediction (``all_rows``) reads no labels, so it checks none."""
    parts = pc.extract_regex(lines, _FASTTEXT_RE)
    text, tags = _tags_anywhere(parts.field("text"), parts.field("tags"), tagged)
    get = {"text": text}
    if columns.label:
        if columns.multilabel and not columns.all_rows:
            # A line without a tag has no label (fastText skips it), no empty set: null, as a missing list is.
            sets = fasttext_sets(tags)
            get["label"] = pc.if_else(pc.equal(pc.list_value_length(sets), 0), pa.scalar(None, sets.type), sets)
        else:
            if not columns.all_rows:
                several = several_tagged(tags)
                bad = pc.sum(several).as_py() or 0
                if bad:
                    line = pc.filter(lines, several)[0].as_py()
                    raise several_labels("several __label__ tags", line, bad).at(url)
            get["label"] = pc.extract_regex(tags, _FIRST_LABEL_RE).field("label")
    cols = Columns(text=("text",), label="label" if columns.label else None,
                   multilabel=columns.multilabel and not columns.all_rows, text_rule=columns.text_rule)
    return get, cols


def _tags_anywhere(text: pa.Array, tags: pa.Array, tagged: int | None = None) -> tuple[pa.Array, pa.Array]:
    """fastText reads every token that starts with ``__label__`` as a label,
    wherever it stands in the line: the tags after a line's leading ones move
    from its text to its tags (never trained as a word, never a missing label).
    Such lines are rare: they alone are rewritten, in Python. ``tagged``: how
    many ``__label__`` the block's bytes hold, when known."""
    # Most blocks hold no tag past the leading ones: the block's own count says so (a memchr-fast
    # count of its bytes), where scanning every text cost a tenth of reading the file.
    if tagged is not None and tagged <= (pc.sum(pc.count_substring(tags, "__label__")).as_py() or 0):
        return text, tags
    later = pc.match_substring_regex(text, _LATER_TAG_RE)
    if not pc.any(later).as_py():
        return text, tags
    rows = pc.indices_nonzero(later)
    new_text, new_tags = [], []
    for t, g in zip(pc.take(text, rows).to_pylist(), pc.take(tags, rows).to_pylist()):
        moved = _TAG_TOKEN.findall(t)
        new_text.append(_TAG_TOKEN.sub("", t).strip())
        new_tags.append(" ".join([g.strip(), *moved]).strip())
    mask = pc.fill_null(later, False)
    return (pc.replace_with_mask(text, mask, pa.array(new_text, text.type)),
            pc.replace_with_mask(tags, mask, pa.array(new_tags, tags.type)))


def sniff_fasttext(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff`` for fastText: the first line and at least half
    of the head's lines start with a ``__label__`` tag (a few unlabelled lines
    are skipped rows, not another format)."""
    lines = head.lines or ((head.cut,) if head.cut else ())
    tagged = sum(line.startswith("__label__") for line in lines)
    return "lines start with __label__" if lines and lines[0].startswith("__label__") and 2 * tagged >= len(lines) \
        else None


def sniff_text(head: Head, fmt: Format) -> str | None:
    """The registry's ``sniff`` for plain text, asked once no other format claims
    the head: a head whose first line is column names over rows of delimited
    fields (:func:`~.csv.delimited_header`) is refused, as read as text each whole
    line, the header too, would be a row's text (its labels in it). None otherwise."""
    found = delimited_header(head)
    if found is None:
        return None
    delimiter, why = found
    said = "tab" if delimiter == "\t" else repr(delimiter)
    way = "{data.format} tsv" if delimiter == "\t" else f"{{data.delimiter}} {said}"
    raise hinted(f"{head.url}: it would be read as plain text, a row per whole line, and its {why}: the header "
                 "would be a row and each row's fields one text",
                 f"pass {way} to read it as a table (or {{data.format}} text if each line is one text)")


def _lines_in_order(data: bytes) -> tuple[pa.Array, pa.Array]:
    """Prediction's slow path for a block with undecodable lines: each line
    in order (an undecodable one as ""), and its status."""
    texts: list[str] = []
    status: list[str | None] = []
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":   # the last line's end, not a line
        pieces.pop()
    for raw in pieces:
        try:
            texts.append(raw.decode("utf-8").strip())
            status.append(None)
        except UnicodeDecodeError:
            texts.append("")
            status.append("undecodable")
    return pa.array(texts, pa.string()), pa.array(status, pa.string())


