"""data/readers/times.py: a Parquet or Arrow column of dates or timestamps is the
text pandas writes to a CSV from the same frame, each value spelled alone."""
from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa

from lancetnic_flow.data.readers.times import is_time_type, iso_text


def _as_csv_and_read(values) -> tuple[list, list]:
    """A column of ``values`` as pandas' CSV spells it, and as :func:`iso_text` reads its Arrow column."""
    frame = pd.DataFrame({"x": values})
    written = frame.to_csv(index=False).splitlines()[1:]
    return written, iso_text(pa.Table.from_pandas(frame)["x"]).to_pylist()


def test_dates_and_timestamps_read_as_the_text_pandas_writes_to_a_csv():
    def stamps(texts):
        return pd.to_datetime(texts, format="ISO8601")

    for values in ([dt.date(2024, 1, 5), dt.date(1960, 2, 1)],
                   stamps(["2024-01-05", "1960-02-01"]),
                   stamps(["2024-01-05 10:30:00", "2024-02-01 00:00:01"]),
                   stamps(["2024-01-05 10:00:00.5", "1969-12-31 23:59:59.25"]),
                   stamps(["2024-01-05 10:00:00.000001", "2024-01-05 10:00:00.000002"]),
                   stamps(["2024-01-05 10:00:00.000000001", "2024-01-05 10:00:00.123456789"]),
                   stamps(["2024-01-05 10:00", "2024-02-01"]).tz_localize("UTC"),
                   stamps(["2024-01-05 10:00", "2024-07-01 09:15"]).tz_localize("Europe/Paris"),
                   stamps(["2024-01-05 10:00", "2024-07-01 09:15"]).tz_localize("America/St_Johns")):
        written, read = _as_csv_and_read(values)
        assert read == written, values


def test_each_value_is_spelled_alone_and_a_missing_one_is_none():
    """pandas spells a whole column one way (a midnight beside a time of day is written
    2024-02-01 00:00:00); a value here reads the same in every chunk and file."""
    _, read = _as_csv_and_read(pd.to_datetime(["2024-01-05 10:30", "2024-02-01", None], format="ISO8601"))
    assert read == ["2024-01-05 10:30:00", "2024-02-01", None]
    chunked = pa.chunked_array([pa.array([0], pa.timestamp("s")), pa.array([None], pa.timestamp("s"))])
    assert iso_text(chunked).to_pylist() == ["1970-01-01", None]
    assert iso_text(pa.chunked_array([], pa.date32())).to_pylist() == []


def test_dates_and_timestamps_are_time_types_and_times_of_day_or_numbers_are_not():
    assert is_time_type(pa.date32()) and is_time_type(pa.date64()) and is_time_type(pa.timestamp("ns", "UTC"))
    assert not is_time_type(pa.time64("us")) and not is_time_type(pa.int64()) and not is_time_type(pa.string())
