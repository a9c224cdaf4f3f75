"""Lower-casing as the tokenizers read text: Python's ``str.lower`` (and so
scikit-learn's), vectorised over Arrow strings. Below the features and the
readers alike: the ``empty_text`` rule (data/usable.py) lower-cases a text as
the features will before it looks its words up among the stop words.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# ``lowercase`` of the functions here: True (str.lower's), False, or this: each character lowered alone
# (pyarrow's utf8_lower; a final capital sigma → σ), as runs whose features are of format 2 or 1 read text.
PER_CHARACTER = "per-character"


# Unicode's Final_Sigma condition, for pyarrow's regular expressions (RE2: no lookaround): a capital
# sigma after a cased letter (case-ignorable characters between) and before no cased letter.
# Cased: Lu, Ll, Lt and the Other_Lowercase/Other_Uppercase letters most text holds (ª º, Roman numerals,
# circled letters); case-ignorable: Mn, Me, Cf, Lm, Sk and Word_Break's MidLetter, MidNumLet and Single_Quote.
_CASED = r"\p{Lu}\p{Ll}\p{Lt}\x{AA}\x{BA}\x{2160}-\x{217F}\x{24B6}-\x{24E9}"
_IGNORABLE = (r"\p{Mn}\p{Me}\p{Cf}\p{Lm}\p{Sk}'.:\x{B7}\x{387}\x{55F}\x{5F4}\x{2018}\x{2019}\x{2024}\x{2027}"
              r"\x{FE13}\x{FE52}\x{FE55}\x{FF07}\x{FF0E}\x{FF1A}")
_FINAL_SIGMA = rf"([{_CASED}][{_IGNORABLE}]*)Σ([{_IGNORABLE}]*(?:[^{_CASED}{_IGNORABLE}]|$))"


def lower(texts: pa.Array) -> pa.Array:
    """Texts lower-cased as Python's ``str.lower`` (and so scikit-learn) does:
    pyarrow's ``utf8_lower`` maps each character alone, so a word's final
    capital sigma became σ where ``str.lower`` gives ς, and "ΚΑΛΟΣ" and
    "καλος" were two terms. Texts without a capital sigma skip the rewrite."""
    if _may_hold_capital_sigma(texts):
        texts = pc.replace_substring_regex(texts, _FINAL_SIGMA, r"\1ς\2")
    return pc.utf8_lower(texts)


def _may_hold_capital_sigma(texts: pa.Array) -> bool:
    """Whether the strings' bytes hold Σ's UTF-8 (CE A3): a scan of the buffer, a
    few times quicker than a substring match per string (0xCE leads Greek only)."""
    buf = texts.buffers()[2] if len(texts.buffers()) > 2 else None   # a null array has no data
    if buf is None:
        return False
    data = np.frombuffer(buf, np.uint8)
    lead = np.flatnonzero(data[:-1] == 0xCE)
    return bool(len(lead)) and bool((data[lead + 1] == 0xA3).any())

__all__ = ["PER_CHARACTER", "lower"]
