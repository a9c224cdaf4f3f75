import pytest

from lancetnic_flow.data.readers import utf8_shapes as shapes_module
from lancetnic_flow.data.readers.utf8_shapes import Utf8Shapes, utf8_shapes


@pytest.mark.parametrize("text, encoding, want", [
    ("café naïve", "utf-8", Utf8Shapes(strong=2)),           # é, ï: Ã before a mark
    ("it’s 日本", "utf-8", Utf8Shapes(strong=3)),              # three-byte characters
    ("Привет", "utf-8", Utf8Shapes(weak=6)),                  # Ð/Ñ before a mark: upper-case letters' shape
    ("CAFÉ… Gruß…", "cp1252", Utf8Shapes(weak=2)),            # genuine cp1252 making UTF-8's shape by chance
    ("naïve café crème", "latin-1", Utf8Shapes(strays=3)),
    ("plain", "ascii", Utf8Shapes()),
])
def test_utf8_characters_are_counted_by_shape_and_other_bytes_past_ascii_as_strays(text, encoding, want):
    assert utf8_shapes(text.encode(encoding)) == want


def test_a_broken_sequence_is_strays_and_an_overlong_or_surrogate_form_no_character():
    assert utf8_shapes(b"caf\xc3") == Utf8Shapes(strays=1)              # cut short at the end
    assert utf8_shapes(b"\xc3\xa9\xa9") == Utf8Shapes(strong=1, strays=1)  # a continuation byte too many
    assert utf8_shapes(b"\xe0\x80\x80 \xed\xa0\x80") == Utf8Shapes(strays=6)


def test_a_character_across_windows_counts_once(monkeypatch):
    monkeypatch.setattr(shapes_module, "WINDOW", 4)
    data = "abc€ déf 😀".encode()   # € starts at a window's last byte, the emoji crosses two windows
    assert utf8_shapes(data) == Utf8Shapes(strong=3)
    assert utf8_shapes(memoryview(data)) == Utf8Shapes(strong=3)
