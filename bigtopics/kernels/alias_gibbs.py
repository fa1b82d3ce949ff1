"""Gibbs sampling of a document's topics with alias tables: an exact draw in O(topics in the
document) per token, or Metropolis-Hastings in O(1) per token (Li, Ahmed, Ravi & Smola 2014;
LightLDA's cycle of word and document proposals).

The target is the conditional of kernels/gibbs.py. With f_w(k) = smoothing[k] + coef[k, w]
(the frozen view's estimate of beta[k, w]: its mean, or exp(E[log beta[k, w]]) with the
geometric estimate; kernels/frozen.py) and n_k = n_dk^{-i}, the counts of the document's other
tokens,

    p(k) ∝ (alpha_k + n_k) f_w(k)
         = n_k f_w(k)              doc part: enumerate the document's topics, coef by the row hash
         + alpha_k coef[k, w]      one alias table per word row, built once per minibatch
         + alpha_k smoothing[k]    one alias table over all K, built once per minibatch

alpha is a number (symmetric: the tables are over coef and smoothing, their masses times alpha)
or K numbers (asymmetric: the tables are over alpha_k coef[k, w] and alpha_k smoothing[k]; the
view's row_coef and smoothing stay unweighted, for f_w); kernels/prior.py resolves which.

Both static parts are exact for the whole minibatch (N is frozen), so the exact sampler needs no
correction: pick a part by its mass, then a topic within it.

The Metropolis-Hastings sampler runs a short chain per token, starting from the token's current
topic s, alternating two independence proposals:

    word proposal  q_w(t) ∝ alpha_t f_w(t): the mixture of the K table and the row table;
                   accept with min(1, p(t) q_w(s) / (p(s) q_w(t)))
                                 = min(1, (alpha_t + n_t) alpha_s / ((alpha_s + n_s) alpha_t))
    doc proposal   q_d(t) ∝ n_t + alpha_t: the topic of one of the document's other tokens, picked
                   uniformly, or with probability alpha_0 / (N' + alpha_0) a topic drawn from
                   alpha_t / alpha_0 (uniform if symmetric), where alpha_0 = sum_k alpha_k and
                   N' = sum_k n_k is the number of other tokens counted;
                   accept with min(1, p(t) q_d(s) / (p(s) q_d(t))) = min(1, f_w(t) / f_w(s))

The doc proposal counts exactly the tokens the target counts: all tokens but this one in a sweep
(the pick skips the token itself, so its own stale topic never enters the proposal), and the
tokens before it during the sequential initialisation, where there is no current topic and the
chain starts from a draw of q_w. Each step leaves p invariant, hence so does the cycle, and the
sweeps form a Markov chain with the same stationary distribution (the document's posterior) as
the exact sampler's; one token's few steps are not an exact draw, so it mixes more slowly per
sweep. A step costs O(1): an alias draw, or one or two row-hash lookups for f_w.

The alias view is the tuple (row_indptr, row_topics, row_coef, row_prob, row_alias, row_totals,
smoothing, smoothing_prob, smoothing_alias, smoothing_total, *index): the rows and their alias tables
(kernels/alias.py) and totals, the dense table, and the rows' index (kernels/frozen.py) spliced in.

The layers, as in kernels/gibbs.py: sample_minibatch (pieces of documents for the threads,
kernels/pieces.py) -> sample_documents (one piece, its scratch: kernels/doc_state.py) -> sample_document
(one document, kernels/jit.py) -> exact_topic / mh_topic (one token, inlined).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pieces
from .alias import alias_draw, alias_table, row_alias_tables
from .doc_state import add_token, document_scratch, finish_document, first_above
from .frozen import lookup
from .jit import document_kernel
from .prior import prior_mass, prior_of, prior_ratio, prior_running_sum, prior_scale, prior_topic
from .rng import next_uniform

# As in kernels/gibbs.py, per-token helpers are inlined and documents run without reference counting.


def alias_view(row_indptr, row_topics, row_coef, smoothing, index, alpha=None) -> tuple:
    """The alias view of one minibatch's frozen topics (the rows' index from kernels/frozen.py),
    its tables weighted by an asymmetric alpha (K numbers) if given (module docstring)."""
    weighted = alpha is not None
    row_prob, row_alias, row_totals = row_alias_tables(row_indptr, alpha[row_topics] * row_coef if weighted
                                                       else row_coef)
    smoothing_prob, smoothing_alias, smoothing_total = alias_table(alpha * smoothing if weighted else smoothing)
    return (row_indptr, row_topics, row_coef, row_prob, row_alias, row_totals,
            smoothing, smoothing_prob, smoothing_alias, float(smoothing_total), *index)


@njit(cache=True, inline="always")
def word_weight(view, w, k):
    """f_w(k) = smoothing[k] + coef[k, w], coef by the row hash."""
    return view[6][k] + lookup(view[10:], w, k)


@njit(cache=True, inline="always")
def exact_topic(state, w, alpha, n_dk, doc_topics, n_doc_topics, view, doc_cum):
    """Draw from p(k) ∝ (alpha_k + n_dk) f_w(k) exactly; n_dk and doc_topics[:n_doc_topics] must
    exclude the token. doc_cum is scratch of at least n_doc_topics entries. Returns (state, k)."""
    (row_indptr, row_topics, _, row_prob, row_alias, row_totals, _, smoothing_prob, smoothing_alias,
     smoothing_total) = view[:10]
    doc_mass = 0.0
    for m in range(n_doc_topics):
        k = doc_topics[m]
        doc_mass += n_dk[k] * word_weight(view, w, k)
        doc_cum[m] = doc_mass
    row_mass = prior_scale(alpha) * row_totals[w]
    state, u = next_uniform(state)
    x = u * (doc_mass + row_mass + prior_scale(alpha) * smoothing_total)
    if x < doc_mass:
        return state, doc_topics[first_above(doc_cum, 0, n_doc_topics, x)]
    state, u = next_uniform(state)
    lo = row_indptr[w]
    if x < doc_mass + row_mass:
        return state, row_topics[lo + alias_draw(row_prob, row_alias, lo, row_indptr[w + 1] - lo, u)]
    return state, alias_draw(smoothing_prob, smoothing_alias, 0, smoothing_prob.shape[0], u)


@njit(cache=True, inline="always")
def word_proposal(state, w, view):
    """t ~ q_w(t) ∝ alpha_t f_w(t) (the view's tables). Returns (state, t, f_w(t)), f_w(t) = -1
    when not known without a lookup."""
    (row_indptr, row_topics, row_coef, row_prob, row_alias, row_totals, smoothing, smoothing_prob,
     smoothing_alias, smoothing_total) = view[:10]
    lo = row_indptr[w]
    state, u = next_uniform(state)
    from_row = u * (smoothing_total + row_totals[w]) < row_totals[w]
    state, u = next_uniform(state)
    if from_row:
        j = lo + alias_draw(row_prob, row_alias, lo, row_indptr[w + 1] - lo, u)
        return state, row_topics[j], smoothing[row_topics[j]] + row_coef[j]
    return state, alias_draw(smoothing_prob, smoothing_alias, 0, smoothing_prob.shape[0], u), -1.0


@njit(cache=True, inline="always")
def mh_topic(state, current, w, i, n_counted, alpha, alpha_cum, n_steps, n_dk, z, view):
    """n_steps Metropolis-Hastings steps (word proposal, doc proposal, word, ...) for token i of
    word w from topic `current` (-1: none yet, start from a draw of q_w) towards
    p(k) ∝ (alpha_k + n_dk) f_w(k), where n_dk counts the n_counted tokens z[j], j = 0..n_counted
    except i (all other tokens in a sweep; during initialisation n_counted = i, the tokens
    before i). alpha_cum = prior_running_sum(alpha). Returns (state, topic)."""
    n_topics = n_dk.shape[0]
    f_current = -1.0  # f_w(current), looked up only when a doc proposal needs it
    if current < 0:
        state, current, f_current = word_proposal(state, w, view)
    for step in range(n_steps):
        if step % 2 == 0:
            state, t, f_t = word_proposal(state, w, view)
            state, u = next_uniform(state)
            if u * (prior_of(alpha, current) + n_dk[current]) * prior_ratio(alpha, t, current) < (
                    prior_of(alpha, t) + n_dk[t]):
                current, f_current = t, f_t
        else:
            state, u = next_uniform(state)
            x = u * (n_counted + prior_mass(alpha, alpha_cum, n_topics))
            if x < n_counted:
                j = int(x)
                t = z[j + 1] if j >= i else z[j]  # skip the token itself
            else:
                state, t = prior_topic(state, x - n_counted, alpha, alpha_cum, n_topics)
            f_t = word_weight(view, w, t)
            if f_current < 0.0:
                f_current = word_weight(view, w, current)
            state, u = next_uniform(state)
            if u * f_current < f_t:
                current, f_current = t, f_t
    return state, current


@document_kernel
def sample_document(entry_words, entry_counts, alpha, alpha_cum, burnin, samples, rare_first, mh_steps, seed, view,
                    n_dk, doc_topics, topic_slot, doc_cum, z, z_saved, tally, out_words, out_topics, out_counts):
    """Sample one document like kernels/gibbs.py sample_document (sequential initialisation, the
    tokens from the last to the first with rare_first, `burnin` discarded sweeps, `samples` saved
    sweeps, the same output), each token's topic
    drawn exactly (mh_steps = 0) or by mh_steps Metropolis-Hastings steps.

    Scratch n_dk / tally / topic_slot must be zero / zero / -1 on entry and are left that way;
    doc_cum needs min(K, document length) entries. Returns the number of pairs written.
    """
    state = seed
    n_doc_topics = 0
    n_tokens = 0
    for e in range(entry_words.shape[0]):
        n_tokens += entry_counts[e]
    for sweep in range(-1, burnin + samples):  # sweep -1 is the sequential initialisation
        backwards = sweep < 0 and rare_first
        i, i_step = (n_tokens - 1, -1) if backwards else (0, 1)
        n_entries = entry_words.shape[0]
        for step in range(n_entries):
            e = n_entries - 1 - step if backwards else step
            w = entry_words[e]
            for _ in range(entry_counts[e]):
                if sweep < 0:  # each token sees only the tokens placed before it
                    current, n_counted = -1, n_tokens - 1 - i if backwards else i
                else:
                    current, n_counted = z[i], n_tokens - 1
                    n_doc_topics = add_token(current, -1, n_dk, doc_topics, topic_slot, n_doc_topics)
                if mh_steps > 0 and backwards:  # the tokens placed so far are z[i + 1:]
                    state, k = mh_topic(state, current, w, n_counted, n_counted, alpha, alpha_cum, mh_steps, n_dk,
                                        z[i + 1:], view)
                elif mh_steps > 0:
                    state, k = mh_topic(state, current, w, i, n_counted, alpha, alpha_cum, mh_steps, n_dk, z, view)
                else:
                    state, k = exact_topic(state, w, alpha, n_dk, doc_topics, n_doc_topics, view, doc_cum)
                z[i] = k
                n_doc_topics = add_token(k, 1, n_dk, doc_topics, topic_slot, n_doc_topics)
                i += i_step
        if sweep >= burnin:
            base = (sweep - burnin) * n_tokens
            for i in range(n_tokens):
                z_saved[base + i] = z[i]
    return finish_document(entry_words, entry_counts, samples, n_tokens, z_saved, n_doc_topics, n_dk, doc_topics,
                           topic_slot, tally, out_words, out_topics, out_counts)


@njit(cache=True, nogil=True)
def sample_documents(first, last, doc_indptr, entry_words, entry_counts, token_starts, doc_seeds, alpha, burnin,
                     samples, rare_first, mh_steps, max_doc_tokens, view, out_words, out_topics, out_counts,
                     out_n_pairs, out_saved):
    """One worker's part of sample_minibatch: documents first..last - 1, one after another, with
    one set of scratch (kernels/doc_state.py) allocated here and reused."""
    n_topics = view[6].shape[0]
    # the float scratch, min(K, longest document) entries, serves as doc_cum
    n_dk, doc_topics, topic_slot, doc_cum, _, _ = document_scratch(n_topics, max_doc_tokens)
    tally = np.zeros(n_topics, np.int32)
    z = np.zeros(max_doc_tokens, np.int32)
    alpha_cum = prior_running_sum(alpha)
    for d in range(first, last):
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        base = token_starts[d] * samples
        top = token_starts[d + 1] * samples
        out_n_pairs[d] = sample_document(
            entry_words[lo:hi], entry_counts[lo:hi], alpha, alpha_cum, burnin, samples, rare_first, mh_steps,
            doc_seeds[d], view, n_dk, doc_topics, topic_slot, doc_cum, z, out_saved[base:top], tally,
            out_words[base:top], out_topics[base:top], out_counts[base:top])


def sample_minibatch(doc_indptr, entry_words, entry_counts, token_starts, doc_seeds, worker_bounds,
                     alpha, burnin, samples, rare_first, mh_steps, max_doc_tokens, view,
                     out_words, out_topics, out_counts, out_n_pairs, out_saved):
    """Sample every document of the minibatch: the pieces worker_bounds[i]..worker_bounds[i + 1] - 1
    (sample_documents), taken by the threads as they come free (kernels/pieces.py); document d
    writes its pairs and saved assignments at offset token_starts[d] * samples, so the output does
    not depend on the pieces or the threads (as kernels/gibbs.py _sample_minibatch)."""
    pieces.run_ranges(sample_documents, worker_bounds, doc_indptr, entry_words, entry_counts, token_starts,
                      doc_seeds, alpha, burnin, samples, rare_first, mh_steps, max_doc_tokens, view, out_words,
                      out_topics, out_counts, out_n_pairs, out_saved)
