"""textcase.py: texts lower-cased as Python's str.lower lowers them, final sigma included."""
import pyarrow as pa

from lancetnic_flow.textcase import PER_CHARACTER, lower


def test_texts_are_lower_cased_as_str_lower_does_a_words_final_sigma_included():
    texts = ["ΚΑΛΟΣ", "ΣΑ ΟΔΟΣ.", "Σ", "Café"]
    assert lower(pa.array(texts)).to_pylist() == [t.lower() for t in texts]
    assert PER_CHARACTER == "per-character"   # the lower-casing of runs of feature format 2 or 1
