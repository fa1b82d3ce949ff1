"""The R largest values of many rows of blended scores, a block of words at a time.

Row (k, l) scores word w as g[l] * a[k, w] + h[l] * b[k, w]: pyLDAvis' relevance of word w in
topic k at the l-th lambda of its grid is lambda log p(w|k) + (1 - lambda) log(p(w|k) / p(w))
(export/pyldavis.py), with g = lambda, h = 1 - lambda, a and b the two logs. Every score is
computed as numpy computes `g * a + h * b` (a product of two doubles, another, their sum: no
fused multiply-add, which numba leaves out without fastmath), so the values, and the words they
pick, are numpy's bit for bit; the scores are never stored, where numpy's lambdas x topics x
words array of them was the export's time (52 s at K = 100 on Reuters) and memory.

`rth_largest` keeps, per row, a min-heap of the R largest scores so far (its root is the R-th
largest); `pick` finds the words above each row's bound and the first R, in word order, of those
between its bounds (level with the R-th, for the last bits of a computation done in another order).
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def rth_largest(a, b, g, h, heaps, seen):
    """Push the scores of a block of words (a, b: K x words) into every row's min-heap of its R
    largest (heaps: K x L x R; `seen` words came before this block, so a heap holds
    min(seen, R) values)."""
    K, n_words = a.shape
    L, R = g.shape[0], heaps.shape[2]
    for k in range(K):
        for w in range(n_words):
            filled = min(seen + w, R)
            for lam in range(L):  # (heaps indexed in place: a slice per row would cost more than its work)
                v = g[lam] * a[k, w] + h[lam] * b[k, w]
                if filled < R:  # still filling: sift the new value up
                    i = filled
                    while i > 0 and heaps[k, lam, (i - 1) // 2] > v:
                        heaps[k, lam, i] = heaps[k, lam, (i - 1) // 2]
                        i = (i - 1) // 2
                    heaps[k, lam, i] = v
                elif v > heaps[k, lam, 0]:  # replaces the root, the smallest: sift it down
                    i = 0
                    while True:
                        child = 2 * i + 1
                        if child >= R:
                            break
                        if child + 1 < R and heaps[k, lam, child + 1] < heaps[k, lam, child]:
                            child += 1
                        if heaps[k, lam, child] >= v:
                            break
                        heaps[k, lam, i] = heaps[k, lam, child]
                        i = child
                    heaps[k, lam, i] = v


@njit(cache=True)
def pick(a, b, g, h, upper, lower, first_word, above, level_words, n_level, is_above):
    """For a block of words (ids first_word, ...): count per row (K x L) the scores above `upper`
    (`above`) and mark their words in `is_above`; record per row the ids of the first R words
    whose score lies in [lower, upper] (`level_words`: K x L x R, `n_level` how many such words
    the row has had)."""
    K, n_words = a.shape
    L, R = g.shape[0], level_words.shape[2]
    for k in range(K):
        for w in range(n_words):
            for lam in range(L):
                v = g[lam] * a[k, w] + h[lam] * b[k, w]
                if v > upper[k, lam]:
                    above[k, lam] += 1
                    is_above[first_word + w] = True
                elif v >= lower[k, lam]:
                    if n_level[k, lam] < R:
                        level_words[k, lam, n_level[k, lam]] = first_word + w
                    n_level[k, lam] += 1
