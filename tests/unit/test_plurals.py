"""A count of one says its noun in the singular, any other count in the plural."""
from __future__ import annotations

from lancetnic_flow.plurals import counted, plural, verb


def test_one_is_singular_and_every_other_count_plural_with_thousands_separators():
    assert counted(1, "row") == "1 row"
    assert counted(0, "row") == "0 rows"
    assert counted(2000, "row") == "2,000 rows"
    assert counted(1, "class") == "1 class" and counted(3, "class") == "3 classes"
    assert counted(2, "entry") == "2 entries" and counted(2, "day") == "2 days"
    assert counted(2, "label value", "label values") == "2 label values"
    assert verb(1, "is", "are") == "is" and verb(4, "is", "are") == "are"


def test_regular_plurals_of_the_nouns_messages_count():
    assert [plural(n) for n in ("row", "partition", "process", "batch", "entry", "key", "epoch",
                                        "validation row")] == [
        "rows", "partitions", "processes", "batches", "entries", "keys", "epochs", "validation rows"]


def test_a_phrase_with_its_verb_is_said_whole_for_one_and_for_many():
    assert counted(1, "label was", "labels were") == "1 label was"
    assert counted(3, "label was", "labels were") == "3 labels were"
