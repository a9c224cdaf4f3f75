"""features/scripts.py: the share of a sample's word characters in scripts
written without spaces tells Chinese, Japanese and Thai from languages that
separate words (English, Korean, Russian, Arabic), whatever the punctuation,
digits and Latin package names mixed in."""
from __future__ import annotations

import pytest

from lancetnic_flow.features.scripts import spaceless_share
from lancetnic_flow.resolve import SPACELESS_SHARE


@pytest.mark.parametrize("text", [
    "古代戦争のリアルタイム戦略ゲーム 0 A.D. は自由でオープンソースの、クロスプラットフォームなゲームです。",
    "基于数学的解谜游戏，是一个自由、开源、跨平台的古代战争实时策略游戏。",
    "ภาษาไทยเขียนติดกันโดยไม่มีช่องว่างระหว่างคำ",
    "ｶﾀｶﾅﾊﾝｶｸ 半角カタカナ",
    "ひらがなだけでかいたぶんしょうです",
    "ພາສາລາວຂຽນຕິດກັນ",
    "ភាសាខ្មែរសរសេរជាប់គ្នា",
    "မြန်မာဘာသာစကား",
])
def test_text_written_without_spaces_is_mostly_spaceless(text):
    share, letters = spaceless_share([text, text])
    assert share >= SPACELESS_SHARE and letters > 10


@pytest.mark.parametrize("text", [
    "A real-time strategy game of ancient warfare, free and open source (0 A.D.)",
    "한국어는 단어 사이에 띄어쓰기를 합니다",
    "Стратегическая игра в реальном времени о войнах древности",
    "لعبة استراتيجية في الوقت الحقيقي",
    "Ｆｕｌｌ－ｗｉｄｔｈ Ｌａｔｉｎ letters　are words",
])
def test_text_with_word_separators_is_not(text):
    share, letters = spaceless_share([text])
    assert share < 0.05 and letters > 10


def test_no_letters_is_no_evidence():
    assert spaceless_share([]) == (0.0, 0)
    assert spaceless_share(["", "!!! ... ？？", "。、「」"]) == (0.0, 0)


def test_the_share_counts_characters_not_texts():
    share, letters = spaceless_share(["漢字" * 10, "latin words here"])
    assert letters == 20 + 14
    assert share == pytest.approx(20 / 34)
