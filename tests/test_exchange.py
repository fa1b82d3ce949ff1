"""The exchange of a minibatch's statistics in word slices (executors/dask.py): the shards' pieces
of each slice merged by themselves, and the merged slices put end to end, are the merged
minibatch bit for bit, for any number of slices."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bigtopics.stats import StepResult, concatenated, merge_results, slice_bounds, split_by_words

N_TOPICS = 7


@st.composite
def shard_results(draw):
    """A few shards' results: entries grouped by word in ascending order, each word's topics
    distinct and in any order, float sums that do not add exactly."""
    shards = []
    for _ in range(draw(st.integers(1, 5))):
        words = sorted(draw(st.sets(st.integers(0, 40), max_size=12)))
        entries_words, entries_topics = [], []
        for word in words:
            topics = draw(st.permutations(range(N_TOPICS)))[:draw(st.integers(1, N_TOPICS))]
            entries_words += [word] * len(topics)
            entries_topics += list(topics)
        sums = draw(st.lists(st.floats(0.01, 1e6), min_size=len(entries_words), max_size=len(entries_words)))
        shards.append(StepResult(np.array(entries_words, np.int64), np.array(entries_topics, np.int64),
                                 np.array(sums, np.float64), 3))
    return shards


@settings(max_examples=200, deadline=None)
@given(shard_results(), st.integers(1, 9))
def test_merged_slices_end_to_end_are_the_merged_minibatch(shards, n_slices):
    whole = merge_results(shards, N_TOPICS)
    distinct = np.unique(np.concatenate([s.words for s in shards]))
    bounds = slice_bounds(distinct, n_slices)
    pieces = [split_by_words(shard, bounds) for shard in shards]
    assert all(len(p) == len(bounds) + 1 for p in pieces)
    merged = [merge_results([p[s] for p in pieces], N_TOPICS) for s in range(len(bounds) + 1)]
    slices = concatenated(merged)
    for name in ("words", "topics", "sums"):
        assert getattr(slices, name).tobytes() == getattr(whole, name).tobytes(), name
    assert slices.divisor == whole.divisor
    # every slice holds words of its own range only, and the slices are as even as the words allow
    for s, result in enumerate(merged):
        assert np.all(np.searchsorted(bounds, result.words, "right") == s)
    counts = [len(np.unique(m.words)) for m in merged]
    assert max(counts) - min(counts) <= 1


def test_slice_bounds_never_make_more_slices_than_words():
    assert len(slice_bounds(np.array([4, 9]), 5)) == 1
    assert len(slice_bounds(np.zeros(0, np.int64), 3)) == 0
