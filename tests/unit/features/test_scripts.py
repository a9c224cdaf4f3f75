"""features/scripts.py: the share of a sample's word characters in scripts
whose words do not repeat in one form tells Chinese, Japanese and Thai
(no spaces), Korean (particles joined to each word) and Hindi, Bengali,
Tamil, … (vowel signs the word pattern cuts words at) from languages whose
words a word analyzer matches (English, Russian, Arabic), whatever the
punctuation, digits and Latin package names mixed in."""
from __future__ import annotations

import pytest

from lancetnic_flow.features.scripts import CHAR_SCRIPTS, char_script_share
from lancetnic_flow.resolve import CHAR_SCRIPT_SHARE


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
def test_text_written_without_spaces_is_read_in_characters(text):
    share, letters = char_script_share([text, text])
    assert share >= CHAR_SCRIPT_SHARE and letters > 10


@pytest.mark.parametrize("text", [
    "한국어는 단어 사이에 띄어쓰기를 합니다",
    "이 패키지는 서버를 위한 라이브러리입니다. 서버의 설정 파일과 서버에서 쓰는 도구 (libfoo-dev 1.2)",
    "ﾡﾢﾣ 반각 한글",
])
def test_korean_whose_particles_join_its_words_is_read_in_characters(text):
    share, letters = char_script_share([text])
    assert share >= CHAR_SCRIPT_SHARE and letters > 5


@pytest.mark.parametrize("text", [
    "मैं आज स्कूल नहीं जाऊँगा, किताब घर पर है",
    "আমি আজ বাড়িতে থাকব এবং বই পড়ব",
    "நான் இன்று பள்ளிக்குச் செல்லமாட்டேன்",
    "ਮੈਂ ਅੱਜ ਸਕੂਲ ਨਹੀਂ ਜਾਵਾਂਗਾ",
    "ನಾನು ಇಂದು ಶಾಲೆಗೆ ಹೋಗುವುದಿಲ್ಲ",
    "මම අද පාසල් යන්නේ නැහැ",
])
def test_brahmic_text_whose_vowel_signs_cut_its_words_is_read_in_characters(text):
    # The word pattern (letters and digits) stops at each vowel sign and virama: "किताब" is no token at all.
    share, letters = char_script_share([text])
    assert share >= CHAR_SCRIPT_SHARE and letters > 10


@pytest.mark.parametrize("text", [
    "A real-time strategy game of ancient warfare, free and open source (0 A.D.)",
    "Стратегическая игра в реальном времени о войнах древности",
    "لعبة استراتيجية في الوقت الحقيقي",
    "Ｆｕｌｌ－ｗｉｄｔｈ Ｌａｔｉｎ letters　are words",
])
def test_text_whose_words_repeat_is_not(text):
    share, letters = char_script_share([text])
    assert share < 0.05 and letters > 10


def test_no_letters_is_no_evidence():
    assert char_script_share([]) == (0.0, 0)
    assert char_script_share(["", "!!! ... ？？", "。、「」"]) == (0.0, 0)


def test_the_share_counts_characters_not_texts():
    share, letters = char_script_share(["漢字" * 10, "latin words here"])
    assert letters == 20 + 14
    assert share == pytest.approx(20 / 34)


def test_the_script_ranges_are_sorted_and_disjoint():
    # The look-up is a binary search over them: an overlap or a misorder would drop a script silently.
    assert all(lo < hi <= nxt for (lo, hi), (nxt, _) in zip(CHAR_SCRIPTS, CHAR_SCRIPTS[1:]))


def test_words_cut_at_their_combining_marks_are_counted_and_composed_text_has_none():
    import unicodedata

    from lancetnic_flow.features.scripts import cut_word_share

    french = "le résumé était très élégant"
    assert cut_word_share([unicodedata.normalize("NFD", french)]) == (0.8, 5)   # "le" alone is whole
    assert cut_word_share([unicodedata.normalize("NFC", french)]) == (0.0, 5)
    # marks in a row between two letters (Vietnamese ế) cut as one does
    assert cut_word_share([unicodedata.normalize("NFD", "biết tiếng")]) == (1.0, 2)
    assert cut_word_share(["كَتَبَ الوَلَدُ الدَّرْسَ"]) == (1.0, 3)   # vocalised Arabic: no composed form
    # a mark at a word's end (Arabic's tanween) drops off it and cuts nothing
    assert cut_word_share(["شكراً جداً كتاب"]) == (0.0, 3)
    assert cut_word_share(["", "   "]) == (0.0, 0)


def test_vowel_marks_that_composing_keeps_are_told_from_accents_written_decomposed():
    import unicodedata

    from lancetnic_flow.features.scripts import vowel_marked

    assert vowel_marked(["كَتَبَ الوَلَدُ الدَّرْسَ"]) == 1.0   # vocalised Arabic: no composed form
    assert vowel_marked(["בְּרֵאשִׁית בָּרָא אֱלֹהִים"]) == 1.0   # pointed Hebrew
    assert vowel_marked([unicodedata.normalize("NFD", "le résumé élégant")]) == 0.0   # NFC joins them
    assert vowel_marked(["كتب الولد الدرس", ""]) == 0.0
