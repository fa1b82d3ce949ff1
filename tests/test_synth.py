"""The synthetic corpus generator (bigtopics/synth.py, tools/synth_corpus.py) and the UCI
bag-of-words converter (tools/uci_to_store.py)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bigtopics import open_store
from bigtopics.kernels.synth import document_lengths
from bigtopics.synth import (
    CorpusSpec,
    alias_tables,
    base_measure,
    block_rows,
    dirichlet,
    draw_topics,
    iter_document_blocks,
    pseudo_words,
    topic_recovery,
    truth_path,
    write_corpus,
)

from . import naive
from .test_evaluate import dense_model

TOOLS = Path(__file__).resolve().parents[1] / "tools"
PSEUDO_WORD = re.compile(r"([bdfghjklmnprstvz][aiou]){3,}")


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw(spec: CorpusSpec, tokens_per_block: int = 1 << 20, with_theta: bool = False):
    """All blocks of a small corpus, with its beta."""
    beta = draw_topics(spec)
    return beta, list(iter_document_blocks(spec, alias_tables(beta), tokens_per_block, with_theta))


def concatenated(blocks, field: str) -> np.ndarray:
    return np.concatenate([getattr(b, field) for b in blocks])


# -- the generator ------------------------------------------------------------------------------


def test_pseudo_words_are_distinct_letter_words_that_no_stop_word_can_be():
    from bigtopics.tokenizer import load_stoplist

    words = pseudo_words(300_000)  # past 64^3: four syllables
    assert len(set(words)) == len(words)
    assert all(PSEUDO_WORD.fullmatch(w) for w in words[:: 997])
    assert {len(w) for w in words} == {8}
    assert {len(w) for w in pseudo_words(1000)} == {6}
    assert not [w for w in load_stoplist("en") if PSEUDO_WORD.fullmatch(w)]


@pytest.mark.parametrize("concentration", [0.01, 0.5, 3.0])
def test_topics_are_dirichlet_draws(concentration):
    rng = np.random.default_rng(1)
    n = 5
    draws = np.array([dirichlet(rng, concentration, n) for _ in range(40_000)])
    np.testing.assert_allclose(draws.sum(1), 1)
    p = 1 / n
    np.testing.assert_allclose(draws.mean(0), p, atol=0.01)
    np.testing.assert_allclose(draws.var(0), p * (1 - p) / (n * concentration + 1), rtol=0.05)


def test_dirichlet_with_a_parameter_per_outcome():
    rng = np.random.default_rng(2)
    a = np.array([3.0, 1.0, 0.5, 0.05, 0.01])
    draws = np.array([dirichlet(rng, a, len(a)) for _ in range(40_000)])
    np.testing.assert_allclose(draws.sum(1), 1)
    m = a / a.sum()
    np.testing.assert_allclose(draws.mean(0), m, atol=0.01)
    np.testing.assert_allclose(draws.var(0), m * (1 - m) / (a.sum() + 1), rtol=0.07, atol=1e-5)


def test_zipf_base_topics_share_their_frequent_words_and_differ_in_the_rest():
    spec = CorpusSpec(n_docs=1, n_topics=50, n_words=5000, mean_length=10, eta=0.1, seed=4, base="zipf",
                      zipf_exponent=1.0)
    m = base_measure(spec)
    np.testing.assert_allclose(m[:3] / m[0], [1, 1 / 2, 1 / 3])
    beta = draw_topics(spec)
    assert np.array_equal(beta, draw_topics(spec))  # seeded
    assert not np.array_equal(beta, draw_topics(CorpusSpec(**{**spec.__dict__, "seed": 5})))
    np.testing.assert_allclose(beta.sum(1), 1)
    # Each topic is Dirichlet(V eta m) (V eta = 500): every topic gives the most frequent words about
    # m_w (standard deviation sqrt(m_w (1 - m_w) / (V eta + 1)), under a seventh of m_w for the first three) ...
    top = beta[:, :10] / m[:10]
    assert top[:, :3].min() > 0.5 and abs(top.mean() - 1) < 0.05
    assert (beta[:, :10].sum(1) > 0.2).all()
    # ... while in the tail each word is frequent in few topics: the topics differ there.
    tail = beta[:, 1000:] / beta[:, 1000:].sum(1, keepdims=True)
    unit = tail / np.linalg.norm(tail, axis=1, keepdims=True)
    assert (unit @ unit.T)[np.triu_indices(len(unit), 1)].mean() < 0.1
    # A uniform base gives topics that share nothing in particular: their most frequent words differ.
    uniform = draw_topics(CorpusSpec(**{**spec.__dict__, "base": "uniform"}))
    assert (uniform[:, :10] / (1 / spec.n_words)).min() < 0.01


def test_zipf_base_corpus_word_frequencies_are_zipfian():
    spec = CorpusSpec(n_docs=2000, n_topics=20, n_words=2000, mean_length=100, seed=1, base="zipf",
                      zipf_exponent=1.0)
    _, blocks = draw(spec)
    freq = np.bincount(concatenated(blocks, "tokens"), minlength=spec.n_words)
    ranks = np.arange(1, 201)
    slope = np.polyfit(np.log(ranks), np.log(np.sort(freq)[::-1][:200]), 1)[0]
    assert -1.15 < slope < -0.85


def test_an_unknown_base_measure_is_refused():
    with pytest.raises(ValueError, match="unknown base measure"):
        CorpusSpec(n_docs=1, n_topics=2, n_words=10, mean_length=5, base="flat").validate()


def test_same_seed_same_corpus_whatever_the_block_size_other_seed_other_corpus():
    spec = CorpusSpec(n_docs=500, n_topics=7, n_words=300, mean_length=20, alpha=0.2, eta=0.05, seed=11)
    _, big = draw(spec, tokens_per_block=1 << 20)
    _, small = draw(spec, tokens_per_block=37)
    assert len(small) > 100
    np.testing.assert_array_equal(concatenated(big, "tokens"), concatenated(small, "tokens"))
    np.testing.assert_array_equal(np.diff(big[0].offsets), np.concatenate([np.diff(b.offsets) for b in small]))
    _, other = draw(CorpusSpec(**{**spec.__dict__, "seed": 12}))
    tokens, other_tokens = concatenated(big, "tokens"), concatenated(other, "tokens")
    assert len(tokens) != len(other_tokens) or (tokens != other_tokens).mean() > 0.5


@pytest.mark.parametrize("mean_length", [4.0, 250.0])  # both Poisson samplers
def test_document_lengths_are_one_plus_poisson(mean_length):
    lengths = document_lengths(3, 0, 200_000, mean_length)
    assert lengths.min() >= 1
    mean, var = lengths.mean(), lengths.var()
    se = np.sqrt((mean_length - 1) / len(lengths))
    assert abs(mean - mean_length) < 5 * se
    assert abs(var / (mean_length - 1) - 1) < 0.02


def test_words_of_each_topic_follow_its_beta_row():
    spec = CorpusSpec(n_docs=2000, n_topics=3, n_words=40, mean_length=60, alpha=0.3, eta=0.5, seed=5)
    beta, blocks = draw(spec)
    topics, tokens = concatenated(blocks, "topics"), concatenated(blocks, "tokens")
    np.testing.assert_allclose(beta.sum(1), 1)
    for k in range(spec.n_topics):
        observed = np.bincount(tokens[topics == k], minlength=spec.n_words)
        expected = beta[k] * observed.sum()
        rare = expected < 5  # pooled into one cell, for the chi-square approximation
        observed = np.append(observed[~rare], observed[rare].sum())
        expected = np.append(expected[~rare], expected[rare].sum())
        chi2 = ((observed - expected) ** 2 / expected).sum()
        dof = len(observed) - 1
        assert dof > 20 and chi2 < dof + 6 * np.sqrt(2 * dof), (k, chi2)
    # Ids are ordered by expected frequency: the column sums of beta descend.
    assert (np.diff(beta.sum(0)) <= 1e-12).all()


def test_a_single_topic_corpus_samples_beta():
    spec = CorpusSpec(n_docs=1000, n_topics=1, n_words=30, mean_length=50, eta=1.0, seed=2)
    beta, blocks = draw(spec)
    tokens = concatenated(blocks, "tokens")
    empirical = np.bincount(tokens, minlength=spec.n_words) / len(tokens)
    assert np.abs(empirical - beta[0]).max() < 5 * np.sqrt(beta[0].max() / len(tokens))
    assert abs(len(tokens) / spec.n_docs - spec.mean_length) < 5 * np.sqrt(spec.mean_length / spec.n_docs)


def test_topic_counts_and_theta_follow_the_dirichlet():
    """n_dk is beta-binomial(N_d, alpha, (K - 1) alpha); theta_d is marginally Dirichlet(alpha)."""
    K, alpha = 4, 0.1
    spec = CorpusSpec(n_docs=4000, n_topics=K, n_words=50, mean_length=30, alpha=alpha, seed=9)
    _, blocks = draw(spec, with_theta=True)
    p = 1 / K
    standardised = []
    for b in blocks:
        for i in range(b.n_docs):
            z = b.topics[b.offsets[i] : b.offsets[i + 1]]
            n = len(z)
            var = n * p * (1 - p) * (n + K * alpha) / (1 + K * alpha)
            standardised.append((np.bincount(z, minlength=K) - n * p) ** 2 / var)
    assert abs(np.mean(standardised) - 1) < 0.05

    theta = np.concatenate([b.theta for b in blocks])
    np.testing.assert_allclose(theta.sum(1), 1, rtol=1e-5)
    dirichlet_var = p * (1 - p) / (K * alpha + 1)
    np.testing.assert_allclose(theta.mean(0), p, atol=0.02)
    np.testing.assert_allclose(theta.var(0), dirichlet_var, rtol=0.1)
    # theta follows the document's own topics: its largest entry is usually the most used topic.
    top_theta = theta.argmax(1)
    top_count = [np.bincount(b.topics[b.offsets[i] : b.offsets[i + 1]], minlength=K).argmax()
                 for b in blocks for i in range(b.n_docs)]
    assert (top_theta == np.array(top_count)).mean() > 0.8


# -- written corpora ----------------------------------------------------------------------------

SMALL = CorpusSpec(n_docs=1500, n_topics=5, n_words=400, mean_length=25, alpha=0.2, eta=0.05, seed=3)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The SMALL corpus written as a store (in several chunks and blocks) and as gzipped JSON Lines."""
    root = tmp_path_factory.mktemp("synth")
    write_corpus(SMALL, root / "c.store", "store", tokens_per_block=5000, entries_per_chunk=4096)
    write_corpus(SMALL, root / "c.jsonl.gz", "jsonl", tokens_per_block=3000)
    return root


def store_rows(store):
    return [blk.row(i) for blk in store.iter_blocks() for i in range(blk.n_docs)]


def test_topic_recovery_is_the_best_match_cosine_of_every_true_topic(tmp_path):
    rng = np.random.default_rng(5)
    truth = rng.dirichlet(np.full(50, 0.1), size=5)
    learned_counts = rng.poisson(40 * np.concatenate([truth[[3, 0]], rng.dirichlet(np.full(50, 0.1), size=5)]))
    model = dense_model(tmp_path / "model.zarr", learned_counts.astype(np.float64))
    (tmp_path / "truth").mkdir()
    np.save(tmp_path / "truth" / "beta.npy", truth)
    learned = np.stack([model.word_probabilities(k) for k in range(model.n_topics)])
    expected = naive.best_match_cosine(learned, truth)
    for block in (1, 3, 64):  # blocks that split the topics evenly, unevenly, not at all
        np.testing.assert_allclose(topic_recovery(model, tmp_path / "truth", block), expected, rtol=1e-5)
    assert expected[[0, 3]].min() > 0.9 and expected[[1, 2, 4]].max() < expected[[0, 3]].min()
    np.save(tmp_path / "truth" / "beta.npy", truth[:, :40])
    with pytest.raises(ValueError, match="40 words, the model 50"):
        topic_recovery(model, tmp_path / "truth")


def test_store_opens_with_exact_word_statistics(written):
    store = open_store(written / "c.store")
    assert store.n_docs == SMALL.n_docs and store.n_words == SMALL.n_words
    assert store.attrs["vocab_order"] == "expected_frequency"
    assert store.settings["synthetic"]["seed"] == SMALL.seed
    assert store.docs_per_block < SMALL.n_docs  # several indptr chunks
    rows = store_rows(store)
    assert all((np.diff(words.astype(np.int64)) > 0).all() and (counts > 0).all() for words, counts in rows)
    term_counts, doc_freqs = naive.word_statistics(rows, store.n_words)
    np.testing.assert_array_equal(store.term_counts, term_counts)
    np.testing.assert_array_equal(store.doc_freqs, doc_freqs)
    assert store.n_tokens == term_counts.sum()
    assert list(store.vocab) == list(pseudo_words(SMALL.n_words))
    assert list(store.doc_ids()) == [str(d) for d in range(SMALL.n_docs)]


def test_truth_is_written_next_to_the_output(written):
    truth = truth_path(written / "c.store")
    beta = np.load(truth / "beta.npy")
    theta = np.load(truth / "theta.npy")
    params = json.loads((truth / "params.json").read_text())
    assert beta.shape == (SMALL.n_topics, SMALL.n_words) and theta.shape == (SMALL.n_docs, SMALL.n_topics)
    np.testing.assert_array_equal(beta, draw_topics(SMALL))
    assert params["seed"] == SMALL.seed and params["n_tokens"] == open_store(written / "c.store").n_tokens
    assert (truth / "vocab.txt").read_text().split() == list(pseudo_words(SMALL.n_words))


def test_jsonl_holds_the_same_documents_and_tokenizes_word_for_word(written):
    from bigtopics.tokenizer import Tokenizer, TokenizerSettings

    with gzip.open(written / "c.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    store = open_store(written / "c.store")
    vocab = list(store.vocab)
    assert [d["id"] for d in docs] == list(store.doc_ids())
    tokenizer = Tokenizer(TokenizerSettings())
    for doc, (words, counts) in zip(docs, store_rows(store)):
        assert Counter(doc["text"].split()) == {vocab[w]: c for w, c in zip(words.tolist(), counts.tolist())}
        ids = tokenizer.token_ids(doc["text"])
        assert ids.min() >= tokenizer.n_stop
        known = tokenizer.words()
        assert [known[i] for i in ids] == doc["text"].split()


def test_existing_output_is_an_error_not_a_traceback(written):
    run = subprocess.run(
        [sys.executable, str(TOOLS / "synth_corpus.py"), str(written / "c.store"), "--docs", "10", "--quiet"],
        capture_output=True, text=True,
    )
    assert run.returncode == 1
    assert run.stderr.startswith("error:") and "already exists" in run.stderr and "Traceback" not in run.stderr


# -- the UCI converter --------------------------------------------------------------------------


def write_docword(path: Path, docs: list[dict[int, int]], n_words: int, lines: list[str] | None = None) -> None:
    """A UCI docword file of docs (wordID -> count, 1-based ids; an empty dict leaves a gap)."""
    body = lines if lines is not None else [
        f"{d} {w} {c}" for d, doc in enumerate(docs, start=1) for w, c in sorted(doc.items())
    ]
    text = f"{len(docs)}\n{n_words}\n{len(body)}\n" + "\n".join(body) + "\n"
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt") as f:
        f.write(text)


@pytest.fixture(scope="module")
def uci_tool():
    return load_tool("uci_to_store")


def test_uci_round_trip(tmp_path, uci_tool, monkeypatch):
    spec = CorpusSpec(n_docs=300, n_topics=4, n_words=120, mean_length=30, eta=0.1, seed=4)
    _, blocks = draw(spec)
    rng = np.random.default_rng(0)
    scramble = rng.permutation(spec.n_words + 5) + 1  # at least 5 words of the vocabulary never occur
    docs = []
    for b in blocks:
        indptr, indices, counts = block_rows(b)
        for i in range(b.n_docs):
            lo, hi = indptr[i], indptr[i + 1]
            docs.append({int(scramble[w]): int(c) for w, c in zip(indices[lo:hi], counts[lo:hi])})
    docs[7] = {}  # two empty documents, dropped
    docs.append({})
    vocab = [f"word{w}" for w in range(1, spec.n_words + 6)]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    write_docword(tmp_path / "docword.txt.gz", docs, len(vocab))
    monkeypatch.setattr(uci_tool, "CHUNK_BYTES", 1000)  # documents straddle chunks

    summary = uci_tool.convert(tmp_path / "docword.txt.gz", tmp_path / "vocab.txt", tmp_path / "u.store")

    used = set().union(*docs)
    assert summary["empty_docs_dropped"] == 2 and summary["unused_words_dropped"] == len(vocab) - len(used) >= 5
    store = open_store(tmp_path / "u.store")
    kept = [d for d, doc in enumerate(docs, start=1) if doc]
    assert list(store.doc_ids()) == [str(d) for d in kept]
    rows = store_rows(store)
    store_vocab = list(store.vocab)
    for d, (words, counts) in zip(kept, rows):
        assert (np.diff(words.astype(np.int64)) > 0).all()
        assert {store_vocab[w]: c for w, c in zip(words.tolist(), counts.tolist())} == \
            {vocab[w - 1]: c for w, c in docs[d - 1].items()}
    term_counts, doc_freqs = naive.word_statistics(rows, store.n_words)
    np.testing.assert_array_equal(store.term_counts, term_counts)
    np.testing.assert_array_equal(store.doc_freqs, doc_freqs)
    assert (np.diff(store.term_counts) <= 0).all() and store.term_counts.min() > 0


@pytest.mark.parametrize("bad_line, message", [
    ("2 7", "expected 'docID wordID count'"),
    ("2 7 1 4", "expected 'docID wordID count'"),
    ("2 x 1", "expected 'docID wordID count'"),
    ("2 99 1", "wordID outside 1..9"),
    ("2 7 0", "count below 1"),
    ("1 8 1", "not in ascending order"),
    ("2 3 5", "wordID 3 a second time"),
])
def test_uci_malformed_line_is_named(tmp_path, uci_tool, bad_line, message):
    lines = ["1 1 2", "1 4 1", "2 3 1", bad_line, "3 2 2"]  # the bad one is line 7 of the file
    write_docword(tmp_path / "docword.txt", [{}] * 3, 9, lines)
    (tmp_path / "vocab.txt").write_text("\n".join(f"w{i}" for i in range(9)))
    with pytest.raises(uci_tool.DocwordError, match=f"docword.txt, line 7: .*{re.escape(message)}"):
        uci_tool.convert(tmp_path / "docword.txt", tmp_path / "vocab.txt", tmp_path / "u.store")
    assert not (tmp_path / "u.store").exists()


@pytest.mark.slow
def test_uci_tool_reports_errors_without_traceback(tmp_path):
    write_docword(tmp_path / "docword.txt", [{}] * 2, 3, ["1 1 1", "2 two 1"])
    (tmp_path / "vocab.txt").write_text("a\nb\nc\n")
    run = subprocess.run(
        [sys.executable, str(TOOLS / "uci_to_store.py"), str(tmp_path / "docword.txt"),
         str(tmp_path / "vocab.txt"), str(tmp_path / "u.store"), "--quiet"],
        capture_output=True, text=True,
    )
    assert run.returncode == 1
    assert run.stderr.startswith("error:") and "line 5" in run.stderr and "Traceback" not in run.stderr
