"""Where CSV/TSV rows end in bytes (data/readers/row_ends.py), and that a
file split anywhere, or streamed in pieces of any size, reads each row once
and whole, quoted line ends and all."""
from __future__ import annotations

import gzip
import io
import random
import re

import numpy as np
import pyarrow as pa
import pytest

from lancetnic_flow.data.readers import read_partition
from lancetnic_flow.data.readers.row_ends import (BARE, CLOSING, FIELD, QUOTED, agreed_state, first_row_end,
                                                  last_row_end, row_start, stream_cut)
from lancetnic_flow.data.sources import Columns, plan_source

COLS = Columns(text=("text",), label="label")
WORDS = ["alpha", "beta", "gamma", 'say "hi"', "a,b", "x\ny", "line\n\nbreaks", '5" screen', "", "end,\n"]


def _b(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), np.uint8)


def _field(text: str, delim: str) -> str:
    # quoted when it must be (a delimiter, a line end, a leading quote), and sometimes when not
    if delim in text or "\n" in text or text.startswith('"') or (text and hash(text) % 3 == 0):
        return '"' + text.replace('"', '""') + '"'
    return text


def _file(rng: random.Random, rows: int, delim: str = ",", crlf: bool = False) -> tuple[bytes, list[int], list]:
    """A file of ``rows`` rows, where each row starts, and the rows."""
    out, starts, want = [f"text{delim}label\n"], [], []
    at = len(out[0].encode())
    for i in range(rows):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))).strip()
        if text.startswith('"'):
            text = "q" + text
        text = f"r{i} {text}"   # every row its own text: a row read twice shows
        label = rng.choice(["sport", "tech", "art"])
        line = _field(text, delim) + delim + label + ("\r\n" if crlf else "\n")
        starts.append(at)
        want.append((text, label))
        out.append(line)
        at += len(line.encode())
    return "".join(out).encode(), starts + [at], want


def test_the_automaton_reads_quotes_as_arrows_csv_parser_does():
    d, q = ord(","), ord('"')
    assert agreed_state(_b('ab"c,'), d, q) == FIELD                  # a quote inside a bare field is text
    assert agreed_state(_b('"a",x,"it said ""no""'), d, q) == QUOTED   # doubled quotes inside quotes
    assert agreed_state(_b('"a",x,"done"'), d, q) == CLOSING
    assert agreed_state(_b('x,"it said ""no""'), d, q) == -1        # no quoted field closed: undecided
    assert agreed_state(_b("no quote here\nat all"), d, q) == -1    # only a long quoted field could be open
    assert first_row_end(_b('"a\nb",c\nd'), FIELD, d, q) == (7, FIELD)
    assert first_row_end(_b('a\nb",c\nd'), QUOTED, d, q) == (6, FIELD)   # starting inside quotes
    assert first_row_end(_b('"a\nb'), FIELD, d, q) == (-1, QUOTED)
    assert last_row_end(_b('a,b\n"c\nd",e\n"f\n'), d, q) == 11
    assert first_row_end(_b('x\n'), BARE, d, q)[0] == 1


@pytest.mark.parametrize("delim, crlf", [(",", False), (",", True), ("\t", False)])
def test_a_cut_anywhere_lands_on_the_next_rows_start(delim, crlf):
    rng = random.Random(7)
    data, starts, _ = _file(rng, 300, delim, crlf)
    f = io.BytesIO(data)
    header_end = data.index(b"\n") + 1
    for offset in list(range(header_end - 1, len(data), 7)) + [len(data) - 1]:
        want = next(s for s in starts if s > offset)   # a row starting at the offset itself is the last cut's
        assert row_start(f, offset, len(data), delim, '"') == want, offset


def test_where_the_window_is_shorter_than_a_row_the_rows_come_out_whole_or_the_run_stops(tmp_path, monkeypatch):
    # windows far shorter than the quoted fields: a cut they cannot decide may fall inside a row
    from lancetnic_flow.data.readers import row_ends
    from lancetnic_flow.errors import UserError

    monkeypatch.setattr(row_ends, "LOOKBACK", 8)
    monkeypatch.setattr(row_ends, "LOOKBACK_MAX", 12)
    monkeypatch.setattr(row_ends, "PIECE", 5)
    data, _, want = _file(random.Random(3), 80)
    path = tmp_path / "short.csv"
    path.write_bytes(data)
    stopped = 0
    for blocksize in range(9, 60, 5):
        try:
            got, _ = _read(str(path), blocksize)
        except UserError as exc:
            assert "cannot be split there" in str(exc)
            stopped += 1
            continue
        ids = [t.split(" ", 1)[0] for t, _ in got if re.match(r"r\d+ ", t)]   # the rows' starts read
        assert len(ids) == len(set(ids)), blocksize   # no row read twice
    assert 0 < stopped < 11   # some cuts crossed and stopped the read; most did not


def _read(path: str, blocksize: int, chunk_bytes: int = 64 * 2**20) -> tuple[list, dict]:
    plan = plan_source([path], blocksize=blocksize)
    chunks = [c for p in plan.partitions for c in read_partition(p, COLS, chunk_bytes=chunk_bytes)]
    table = pa.concat_tables([c.table for c in chunks])
    skipped: dict = {}
    for c in chunks:
        for k, v in c.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
    return list(zip(table.column("text").to_pylist(), table.column("label").to_pylist())), skipped


@pytest.mark.parametrize("name, delim", [("q.csv", ","), ("q.tsv", "\t")])
def test_a_file_split_at_any_block_size_reads_every_quoted_row_once_and_whole(tmp_path, name, delim):
    data, _, want = _file(random.Random(11), 150, delim)
    path = tmp_path / name
    path.write_bytes(data)
    for blocksize in (37, 257, 4096, len(data)):
        got, skipped = _read(str(path), blocksize)
        assert skipped == {} and got == want, blocksize


def test_a_compressed_file_read_in_pieces_of_any_size_reads_every_quoted_row_once(tmp_path):
    data, _, want = _file(random.Random(5), 150, ",", crlf=True)
    path = tmp_path / "q.csv.gz"
    path.write_bytes(gzip.compress(data))
    for chunk_bytes in (50, 333, 10**6):
        got, skipped = _read(str(path), 2**20, chunk_bytes)
        assert skipped == {} and got == want, chunk_bytes


def test_a_stream_piece_is_cut_after_its_last_row_not_inside_a_quoted_field():
    assert stream_cut(b'a,b\n"c\nd', ",", '"') == 4
    assert stream_cut(b'"c\nd', ",", '"') == -1            # one row so far: keep reading
    assert stream_cut(b"a\nb\nc", None, None) == 4          # a line format: the last newline


def test_records_are_the_automatons_with_a_stray_and_an_unclosed_quotes_record_marked():
    from lancetnic_flow.data.readers.row_ends import STRAY, UNCLOSED, WHOLE, records

    d, q = ord(","), ord('"')
    data = b'a,x\n"stray opens,x\nb,x\nthe 5" screen,x\n"two\nlines",x\n"lenient" text,x\n"open\nto the end'
    starts, ends, kinds = records(_b(data.decode()), d, q, True)
    got = [(data[s:e], k) for s, e, k in zip(starts, ends, kinds)]
    assert got == [(b"a,x\n", WHOLE), (b'"stray opens,x\nb,x\nthe 5" screen,x\n', STRAY),
                   (b'"two\nlines",x\n', WHOLE), (b'"lenient" text,x\n', WHOLE),   # one line: no stray
                   (b'"open\nto the end', UNCLOSED)]
    # without ``every``, the records a reader must re-read only
    assert [int(k) for k in records(_b(data.decode()), d, q, False)[2]] == [STRAY, UNCLOSED]
    assert len(records(_b('"say ""hi""\nthere",x\n'), d, q, False)[0]) == 0


def test_misfit_records_are_those_whose_quoted_field_took_a_line_end_in_a_row_of_too_many_fields():
    from lancetnic_flow.data.readers.row_ends import misfit_records

    d, q = ord(","), ord('"')
    data = (b'a,x\n"two\nlines",x\n"two\nlines",x,extra\nshort\n \t \n\n"a, b",x\n"q\r\nr"\r\n'
            b'"in ""quotes""\n, too",x,y\n"open\nto the end,x,y')
    starts, ends = misfit_records(_b(data.decode()), d, q, 2, True)
    # one line of a wrong count (a parser reads it in place), a short row (its missing fields read empty) and a
    # quoted delimiter are no misfit
    assert [data[s:e] for s, e in zip(starts, ends)] == [b'"two\nlines",x,extra\n', b'"in ""quotes""\n, too",x,y\n']
    assert len(misfit_records(_b(data.decode()), d, q, 3, True)[0]) == 0
    # every record of too many fields (prediction lists each in place)
    starts, ends = misfit_records(_b(data.decode()), d, q, 2, False)
    assert [data[s:e] for s, e in zip(starts, ends)] == [b'"two\nlines",x,extra\n', b'"in ""quotes""\n, too",x,y\n']
    tsv = b'a\tx\n\t\t\n  \n'   # in TSV a line of tabs holds fields
    assert [tsv[s:e] for s, e in zip(*misfit_records(_b(tsv.decode()), 9, q, 2, False))] == [b"\t\t\n"]


@pytest.mark.parametrize("delim", [",", "\t"])
def test_short_records_get_the_delimiters_they_lack_before_their_line_end_and_blank_ones_none(delim):
    from lancetnic_flow.data.readers.row_ends import padded_short_records

    d = delim
    data = f'a{d}b{d}c\nx\n\n   \ny{d}z\r\n"q\nr"\nlast'
    got = bytes(padded_short_records(_b(data), ord(d), ord('"'), 3)).decode()
    assert got == f'a{d}b{d}c\nx{d}{d}\n\n   \ny{d}z{d}\r\n"q\nr"{d}{d}\nlast{d}{d}'
    assert bytes(padded_short_records(_b(""), ord(d), ord('"'), 3)) == b""


def test_a_lone_cr_ends_a_row_for_the_automaton_and_the_cuts_as_a_newline_does():
    d, q = ord(","), ord('"')
    assert first_row_end(_b('a\r"b\nc",x\n'), FIELD, d, q) == (1, FIELD)    # a lone \r ends the row "a"
    assert first_row_end(_b('a,b\r\nc'), FIELD, d, q) == (4, FIELD)         # \r\n ends at its \n
    assert first_row_end(_b('"a\rb",x\r'), FIELD, d, q) == (7, FIELD)      # a quoted \r is text
    assert agreed_state(_b('x"\r"b\nc'), d, q) == QUOTED                    # a quote opens after a lone \r
    assert last_row_end(_b('a\rb\r'), d, q) == 1       # a \r ending a piece waits for the next byte
    assert stream_cut(b'a\r"b\rc",x\rd', ",", '"') == 10


def _mixed_ends_file(rng: random.Random, rows: int, delim: str) -> bytes:
    words = ["alpha", "a,b", "x\ny", "cr\rin", "crlf\r\nin", 'say "hi"', "tab\tx"]
    ends = ["\n", "\r", "\r\n"]
    out = [f"text{delim}label" + rng.choice(ends)]
    for i in range(rows):
        text = f"r{i} " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))
        if any(c in text for c in (delim, "\n", "\r", '"')):
            text = '"' + text.replace('"', '""') + '"'
        out.append(text + delim + rng.choice(["sport", "tech"]) + rng.choice(ends))
    return "".join(out).encode()


@pytest.mark.parametrize("name, delim", [("m.csv", ","), ("m.tsv", "\t")])
def test_a_file_of_mixed_line_ends_split_anywhere_or_streamed_reads_the_rows_pandas_reads(tmp_path, name, delim):
    # \n, \r\n and lone \r (classic Mac files) row ends, quoted fields holding each: the header was refused
    # ("new-line character seen"), and a quote after a lone \r was misjudged where the file was cut
    import pandas as pd

    for seed in range(3):
        data = _mixed_ends_file(random.Random(seed), 60, delim)
        ref = pd.read_csv(io.BytesIO(data), sep=delim, dtype=str, keep_default_na=False)
        want = list(zip(ref["text"], ref["label"]))
        path = tmp_path / name
        path.write_bytes(data)
        for blocksize in (17, 61, 250, len(data)):
            got, skipped = _read(str(path), blocksize)
            assert skipped == {} and got == want, (seed, blocksize)
        path = tmp_path / (name + ".gz")
        path.write_bytes(gzip.compress(data))
        for chunk_bytes in (40, 300):
            assert _read(str(path), 2**20, chunk_bytes) == (want, {}), (seed, chunk_bytes)


def _short_rows_file(rng: random.Random, rows: int, delim: str, trailing: bool) -> bytes:
    """Rows of text and label, some short of their label (over quoted line ends too), a few blank lines;
    ``trailing``: the header ends in a delimiter, an unnamed column no row fills."""
    out = [f"text{delim}label" + delim * trailing + "\n"]
    for i in range(rows):
        text = f"r{i} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        field = _field(text.strip(), delim)
        kind = rng.random()
        out.append(field + "\n" if kind < 0.3 else field + delim + rng.choice(["sport", "tech"]) +
                   rng.choice(["\n", "\r\n"]))
        if kind > 0.95:
            out.append(rng.choice(["\n", "   \n"]))
    return "".join(out).encode()


@pytest.mark.parametrize("name, delim", [("s.csv", ","), ("s.tsv", "\t")])
@pytest.mark.parametrize("trailing", [False, True], ids=["header", "header-ending-in-a-delimiter"])
def test_short_rows_read_as_pandas_reads_them_however_the_file_is_cut(tmp_path, name, delim, trailing):
    # a row of fewer fields than the header was malformed and skipped: a header ending in a delimiter
    # dropped every row, where pandas reads the missing fields as missing values
    import pandas as pd

    for seed in range(3):
        data = _short_rows_file(random.Random(seed), 80, delim, trailing)
        ref = pd.read_csv(io.BytesIO(data), sep=delim, dtype=str, keep_default_na=False).fillna("")
        rows = list(zip(ref["text"], ref["label"]))
        want = [r for r in rows if r[1]]
        path = tmp_path / name
        path.write_bytes(data)
        for blocksize in (17, 61, 250, len(data)):
            assert _read(str(path), blocksize) == (want, {"missing_label": len(rows) - len(want)}), (seed, blocksize)
            plan = plan_source([str(path)], blocksize=blocksize)
            listed = [r for p in plan.partitions
                      for c in read_partition(p, Columns(text=("text",), label="label", all_rows=True))
                      for r in c.table.to_pylist()]
            assert [(r["text"], r["label"] or "") for r in listed] == rows, (seed, blocksize)
            assert {r["status"] for r in listed} == {"ok"}
