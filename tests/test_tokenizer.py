import naive
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bigtopics.tokenizer import Tokenizer, TokenizerSettings, load_stoplist

PLAIN = TokenizerSettings(stoplist="none")


def tokens(tok: Tokenizer, text) -> list[str]:
    ids = tok.token_ids(text)
    words = tok.words()
    return [words[i] for i in ids]


def test_letter_runs_lowercased_min_length():
    tok = Tokenizer(PLAIN)
    assert tokens(tok, "The cat's 2nd hat_box, in x42y: OK!! Cats") == ["the", "cat", "hat", "box", "cats"]


def test_unicode_letters_marks_and_normalization():
    tok = Tokenizer(PLAIN)
    nfd = "cafe\u0301"  # e + combining acute: one word, the same as the composed form
    assert tokens(tok, f"Straße ΑΘΗΝΑ café {nfd} नमस्ते 東京都") == ["straße", "αθηνα", "café", "café", "नमस्ते", "東京都"]


def test_ascii_bytes_fast_path_matches_str():
    a, b = Tokenizer(PLAIN), Tokenizer(PLAIN)
    text = "Hello hello World, the world is wide"
    assert np.array_equal(a.token_ids(text), b.token_ids(text.encode("ascii")))


def test_stop_words_get_the_lowest_ids():
    tok = Tokenizer(TokenizerSettings(stoplist="en"))
    assert tok.n_stop >= 400 and "the" in tok.words()[: tok.n_stop]
    ids = tok.token_ids("the cat and the hat")
    assert [i >= tok.n_stop for i in ids] == [False, True, False, False, True]


def test_what_contractions_leave_behind_is_stopped():
    tok = Tokenizer(TokenizerSettings(stoplist="en"))
    ids = tok.token_ids("I don't fish, she didn't sail and couldn't row; it wasn't the whale's")
    assert [tok.words()[i] for i in ids if i >= tok.n_stop] == ["fish", "sail", "row", "whale"]


def test_keep_case_still_drops_capitalized_stop_words():
    tok = Tokenizer(TokenizerSettings(stoplist="en", keep_case=True))
    ids = tok.token_ids("The Cat THE cat")
    kept = [tok.words()[i] for i in ids if i >= tok.n_stop]
    assert kept == ["Cat", "cat"]


def test_stoplist_file_and_none(tmp_path):
    f = tmp_path / "stop.txt"
    f.write_text("# comment\nfoo\n\nbar\n")
    assert load_stoplist(str(f)) == ["foo", "bar"]
    assert load_stoplist("none") == []


def test_token_pattern_overrides_letter_runs():
    tok = Tokenizer(TokenizerSettings(stoplist="none", token_pattern=r"\w+", min_length=2))
    assert tokens(tok, "R2D2 and C3PO, x") == ["r2d2", "and", "c3po"]


def test_word_ids_keep_words_as_given_and_merge_spellings():
    tok = Tokenizer(TokenizerSettings(stoplist="none", token_pattern=r"[a-z]{4,}"))  # neither applies to them
    ids = tok.word_ids(["Apple", "apple", "ab", "don't", "x1", "C++", "c++", "pear"])
    assert tok.words() == ["apple", "ab", "don't", "x1", "c++", "pear"]
    assert ids.tolist() == [0, 0, 1, 2, 3, 4, 4, 5]


def test_tables_grow_past_their_initial_size():
    tok = Tokenizer(PLAIN)
    words = [f"wx{''.join(chr(97 + int(d)) for d in str(i))}" for i in range(20000)]
    long_word = "z" * 100_000
    ids = tok.token_ids(" ".join(words + [long_word] + words))
    assert len(ids) == 40001 and tok.n_words == 20001
    assert np.array_equal(ids[:20000], ids[20001:]) and tok.words()[ids[20000]] == long_word


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("abcAB éÉüß\u0301 .,1_-\nдаДА日本"), max_size=80))
def test_tokens_match_the_naive_tokenizer(text):
    tok = Tokenizer(PLAIN)
    counts = {}
    for w in tokens(tok, text):
        counts[w] = counts.get(w, 0) + 1
    assert counts == naive.bag_of_words(text)
