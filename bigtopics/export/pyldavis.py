"""pyldavis.json: the arguments of pyLDAvis.prepare, `pyLDAvis.prepare(**json.load(f))`.

pyLDAvis uses doc_topic_dists and doc_lengths only through the topic token counts
sum_d theta_dk N_d, so a single document holding every token, theta_k = N[k] / sum_k N[k] with
doc_lengths = [sum_k N[k]], gives it exactly the model's topic sizes without a documents x topics
matrix (nor a K x K identity, which at K = 20,000 is 400 million numbers). topic_term_dists are
the model's p(w | k) = (eta + N[k, w]) / (V eta + N[k]), unchanged. pyLDAvis derives every term
frequency from these two (sum_k p(w | k) N[k], the model's count of the word), not from
term_frequency, which is given as the same numbers. Topics keep their order (sort_topics false);
its page (LDAvis's script) reads topic 0 as "no topic selected", so they are numbered from 1
(start_index 1): pyLDAvis's "Topic n" is bigtopics' topic n - 1.

Up to MAX_CELLS topics x words the vocabulary is whole. Beyond, it holds the terms prepare would
show over the whole vocabulary (chosen_terms): for each topic the R most relevant terms at every
lambda of its grid, relevance = lambda log p(w|k) + (1 - lambda) log(p(w|k) / p(w)) with p(w) the
word's share of the model's tokens, and the R most salient terms of its default view (Chuang et
al. 2012), with the model's p(w | k). pyLDAvis refuses rows that do not sum to 1, so the rest of
each topic's mass, 1 - sum of its chosen p(w | k), is spread evenly over `n_rest` terms REST_TERM
(rest_terms): each so small a part that no topic ranks it among its R most relevant at any lambda
of the grid nor the default view among its R most salient, yet together they keep every chosen
term's share p(w) exact. So prepare, given the file, lists for every topic and the default view
the same terms with the same frequencies and relevance as over the whole vocabulary; only the
topics' map (pyLDAvis's multidimensional scaling of the rows) sees the rest evenly spread. (A
topic close to the corpus's own word shares, whose R-th lift is hardly above its rest's, lists
rest terms at small lambda whatever their number: the export names such topics.) R and
lambda_step are prepare's defaults, written into the file. The lambdas x topics x words scores
are never held: kernels/top_values.py blends each from the two logs of a block of words as numpy
would, bit for bit, keeping per list the R largest (the terms, and the file, are those numpy's
whole arrays gave, in a fifth of the time at K = 100). The file is written a topic's row at a
time; beyond MAX_FILE_CELLS topics x terms (pyLDAvis compares every pair of topics: it could not
show such a model) it is left out with a notice, before the terms are chosen when those of lambda =
1 alone pass it (fewest_terms).

pyLDAvis's page (prepared_data_to_html, save_html) copies its data into a <script> element as
json.dumps writes it, with "<" and "/" unescaped: a word holding "</script>" would end the
element and what follows would run. Each word is written escape.inert_in_script (U+200B, a zero
width space, after a "<" starting "</" or "<!"), which the page shows as the word.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..escape import inert_in_script
from ..kernels import top_values
from ..memory import available_bytes, format_bytes
from .base import ExportContext, Writer, topic_word_probabilities

R = 30  # pyLDAvis.prepare's defaults
LAMBDA_STEP = 0.01
MAX_CELLS = 1 << 21
MAX_FILE_CELLS = 1 << 25
CELLS_PER_PASS = 1 << 22  # topics x words held at once while choosing terms
REST_TERM = "(rest of the vocabulary {i} of {n})"
REST_MARGIN = 4.0  # how far below the last shown term the rest terms stay (a factor of probability)
TIE_TOLERANCE = 1e-9  # relative: values this close to a list's last are level with it


def lambdas() -> np.ndarray:
    """prepare's grid of lambda, computed as prepare computes it."""
    return np.arange(0, 1 + LAMBDA_STEP, LAMBDA_STEP)


def least_cells(model) -> int:
    """Topics x terms the file holds at least: the whole vocabulary's, or beyond MAX_CELLS R terms
    a topic (chosen_terms finds how many more, in three passes over the words)."""
    cells = model.n_topics * model.n_words
    return cells if cells <= MAX_CELLS else model.n_topics * (R + 1)


def _word_blocks(model, cells: int):
    step = max(1, cells // max(model.n_topics, 1))
    for lo in range(0, model.n_words, step):
        words = np.arange(lo, min(lo + step, model.n_words))
        yield words, topic_word_probabilities(model, words)


class _Scores:
    """The two scores prepare ranks terms by, a block of words at a time, each as rows that
    kernels/top_values.py blends, g[l] a[k, w] + h[l] b[k, w]: relevance (row (k, l): lambda
    log p(w|k) + (1 - lambda) log(p(w|k) / p(w)), g = lambda, h = 1 - lambda) and saliency (one
    row, p(w) times the word's distinctiveness, as a = saliency, b = 0, g = 1, h = 0: exactly the
    saliency), computed as prepare computes them."""

    def __init__(self, proportion: np.ndarray, shares: np.ndarray):
        self.proportion, self.shares = proportion, shares
        self.g, self.h = lambdas(), 1 - lambdas()

    def relevance(self, words: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.log(p), np.log(p / self.proportion[words])

    def saliency(self, words: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        given_term = p / p.sum(axis=0)
        distinctiveness = (given_term * np.log(given_term / self.shares[:, None])).sum(axis=0)
        return (self.proportion[words] * distinctiveness)[None, :], np.zeros((1, len(words)))


class _Ranking:
    """Rows of a score (K x L; _Scores) ranked as nlargest(R) ranks them, in two passes over the
    words in ascending order: `last`, each row's R-th largest value; then the terms it takes in
    each row: every term above `last`, and of the terms level with it (within TIE_TOLERANCE, for
    the last bits of a computation done in another order) the lowest ids, as pandas keeps the
    first of equal values."""

    def __init__(self, g: np.ndarray, h: np.ndarray, rows: int, n_words: int):
        self.g, self.h, self.n_words = g, h, n_words
        self.heaps = np.full((rows, len(g), R), np.inf)
        self.seen = 0

    def add_values(self, a: np.ndarray, b: np.ndarray) -> None:
        top_values.rth_largest(a, b, self.g, self.h, self.heaps, self.seen)
        self.seen += a.shape[1]

    def rth_values(self) -> np.ndarray:
        """Each row's R-th largest value (K x L), once every word's values are in; readies the picking pass."""
        last = self.heaps.min(axis=-1)
        self.heaps = None  # (K x L x R values: gone before the picking pass's K x L x R word ids come)
        tolerance = TIE_TOLERANCE * np.maximum(1.0, np.abs(last))
        self.upper, self.lower = last + tolerance, last - tolerance
        self.above, self.n_level = np.zeros(last.shape, np.int64), np.zeros(last.shape, np.int64)
        self.level_words = np.zeros(last.shape + (R,), np.int32)
        self.is_above = np.zeros(self.n_words, np.bool_)
        return last

    def add_terms(self, words: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        top_values.pick(a, b, self.g, self.h, self.upper, self.lower, int(words[0]), self.above,
                        self.level_words, self.n_level, self.is_above)

    def chosen(self) -> np.ndarray:
        wanted = R - self.above  # the level terms each row takes, lowest ids first
        ties = self.level_words[np.arange(R) < np.minimum(wanted, self.n_level)[..., None]]
        return np.union1d(np.flatnonzero(self.is_above), ties)


def chosen_terms(model) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, float]:
    """(word ids ascending, each topic's R-th relevance at every lambda (lambdas x K), the R-th
    saliency, topic shares, the model's tokens) of the terms prepare shows over the whole
    vocabulary: three passes over the words (their frequencies, each list's R-th value, the terms)."""
    totals = model.topic_totals()
    total = float(totals.sum())
    shares = totals / total
    scores = _Scores(_proportion(model, totals), shares)
    relevant = _Ranking(scores.g, scores.h, model.n_topics, model.n_words)
    salient = _Ranking(np.ones(1), np.zeros(1), 1, model.n_words)
    last_relevance, last_saliency = _rank(model, ((relevant, scores.relevance), (salient, scores.saliency)))
    return (np.union1d(relevant.chosen(), salient.chosen()), np.ascontiguousarray(last_relevance.T),
            float(last_saliency[0, 0]), shares, total)


def fewest_terms(model) -> int:
    """How many terms chosen_terms chooses at least: those of the grid's last lambda, 1 (its row of
    relevance is g = 1, h = 0 in either ranking, so the same numbers pick the same terms), in a
    hundredth of the blending; enough to leave out, before choosing, a file too large to show."""
    totals = model.topic_totals()
    scores = _Scores(_proportion(model, totals), totals / float(totals.sum()))
    at_one = _Ranking(np.ones(1), np.zeros(1), model.n_topics, model.n_words)
    _rank(model, ((at_one, scores.relevance),))
    return len(at_one.chosen())


def _proportion(model, totals: np.ndarray) -> np.ndarray:
    """Each word's share of the model's tokens, sum_k p(w|k) N[k] normalised, as prepare computes it."""
    frequency = np.zeros(model.n_words)
    for words, p in _word_blocks(model, CELLS_PER_PASS):
        frequency[words] = totals @ p
    return frequency / frequency.sum()


def _rank(model, rankings) -> list[np.ndarray]:
    """Each (ranking, score) pair's R-th values (rows x lambdas), then its terms: two passes over the words."""
    for words, p in _word_blocks(model, CELLS_PER_PASS):
        for ranking, score in rankings:
            ranking.add_values(*score(words, p))
    lasts = [ranking.rth_values() for ranking, _ in rankings]
    for words, p in _word_blocks(model, CELLS_PER_PASS):
        for ranking, score in rankings:
            ranking.add_terms(words, *score(words, p))
    return lasts


def chosen_mass(model, terms: np.ndarray) -> np.ndarray:
    """sum_{w in terms} p(w | k) per topic, a block of terms at a time."""
    mass = np.zeros(model.n_topics)
    step = max(1, CELLS_PER_PASS // max(model.n_topics, 1))
    for lo in range(0, len(terms), step):
        mass += topic_word_probabilities(model, terms[lo:lo + step]).sum(axis=1)
    return mass


def rest_terms(rest: np.ndarray, shares: np.ndarray, last_relevance: np.ndarray, last_saliency: float,
               most: int) -> tuple[int, np.ndarray]:
    """(n, topics) : how many even parts of each topic's rest of mass (`rest`, K) keep them out of
    every list prepare shows, at most `most`, and the topics where no such n does. At each lambda
    of the grid a part's relevance in topic k is lambda log(rest_k / n) + (1 - lambda) log(rest_k /
    sum_j rest_j share_j) (its lift does not depend on n): it must stay below topic k's R-th
    (`last_relevance`, lambdas x K) by lambda log REST_MARGIN; and its saliency below the R-th. At
    small lambda no n may do: a topic whose R-th lift is hardly above its rest's (one close to the
    corpus's own distribution) lists parts there. n is 0 when there is no rest."""
    if rest.max() <= 0:
        return 0, np.zeros(0, np.int64)
    pooled = float(rest @ shares)
    lift = np.log(np.maximum(rest, 1e-300) / pooled)
    grid = lambdas()[:, None]
    positive = grid[:, 0] > 0
    room = last_relevance[positive] - (1 - grid[positive]) * lift[None, :]
    # lambda (log rest_k - log n + log margin) < room, for n:
    need = np.log(np.maximum(rest, 1e-300))[None, :] + math.log(REST_MARGIN) - room / grid[positive]
    topics = np.flatnonzero((need > math.log(most)).any(axis=0) | (last_relevance[0] <= lift))
    log_n = float(np.max(np.where(need > math.log(most), -np.inf, need)))
    given_topic = rest / rest.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        distinctiveness = float(np.nansum(given_topic * np.log(given_topic / shares)))
    if distinctiveness > 0 and last_saliency > 0:
        log_n = max(log_n, math.log(REST_MARGIN * pooled * distinctiveness / last_saliency))
    return int(min(most, max(1, math.ceil(math.exp(min(log_n, math.log(most))))))), topics


def write_pyldavis(ctx: ExportContext, out: Path) -> None:
    model = ctx.model
    totals = model.topic_totals()
    total = float(totals.sum())
    shares = totals / total if total > 0 else np.full(model.n_topics, 1.0 / model.n_topics)
    terms, n_rest = np.arange(model.n_words), 0
    if least_cells(model) < model.n_topics * model.n_words:
        if model.n_topics * model.n_words > MAX_FILE_CELLS:  # (else every choice fits)
            fewest = fewest_terms(model)
            if model.n_topics * fewest > MAX_FILE_CELLS:
                _left_out(ctx, model.n_topics, fewest, "at least ")
                return
        terms, last_relevance, last_saliency, shares, total = chosen_terms(model)
        rest = np.maximum(1.0 - chosen_mass(model, terms), 0.0)
        most = max(1, MAX_FILE_CELLS // model.n_topics - len(terms))
        n_rest, listed = rest_terms(rest, shares, last_relevance, last_saliency, most)
        if len(listed):
            named = ", ".join(map(str, listed[:10].tolist())) + (" ..." if len(listed) > 10 else "")
            ctx.log(f"export: pyldavis.json: topics {named} (pyLDAvis numbers them from 1) are close to the "
                    "corpus's own word shares, so at small lambda pyLDAvis lists among their most relevant the "
                    "\"(rest of the vocabulary ...)\" terms that hold the rest of their mass")
    columns = len(terms) + n_rest
    cells = model.n_topics * columns
    if cells > MAX_FILE_CELLS or 8 * cells > available_bytes() // 2:
        _left_out(ctx, model.n_topics, columns)
        return
    dists = topic_word_probabilities(model, terms)
    vocab = [inert_in_script(str(w)) for w in model.vocab[terms]]
    if n_rest:
        rest = np.maximum(1.0 - dists.sum(1, keepdims=True), 0.0) / n_rest
        dists = np.concatenate([dists, np.repeat(rest, n_rest, axis=1)], axis=1)
        vocab += [REST_TERM.format(i=i + 1, n=n_rest) for i in range(n_rest)]
    head = {"doc_topic_dists": [shares.tolist()], "doc_lengths": [total], "vocab": vocab,
            "term_frequency": (dists.T @ (shares * total)).tolist(), "R": R, "lambda_step": LAMBDA_STEP,
            "sort_topics": False, "start_index": 1}
    with open(out / "pyldavis.json", "w", encoding="utf-8") as f:
        f.write('{"topic_term_dists": [')
        for k, row in enumerate(dists):  # a row at a time: the text of K x terms numbers is never held whole
            f.write(("," if k else "") + json.dumps(row.tolist()))
        f.write("], " + json.dumps(head)[1:])


def _left_out(ctx: ExportContext, n_topics: int, columns: int, at_least: str = "") -> None:
    cells = n_topics * columns
    ctx.log(f"export: pyldavis.json left out ({n_topics:,} topics x {at_least}{columns:,} terms are "
            f"{at_least}{cells:,} probabilities, {at_least}{format_bytes(8 * cells)} in memory, beyond the "
            f"{MAX_FILE_CELLS:,} pyLDAvis can show; {format_bytes(available_bytes())} available); the other files "
            "are written")


WRITERS = (Writer(("pyldavis.json",), write_pyldavis),)
