"""Tables → terms → the fitted vocabulary → CSR rows (see docs/architecture.md).

``register_tokenizer`` is the one name exported here: a tokenizer of your
own, used by runs trained with ``--tokenizer`` (``lancetnic_flow/tokenizers.py``)."""
from ..tokenizers import register_tokenizer

__all__ = ["register_tokenizer"]
