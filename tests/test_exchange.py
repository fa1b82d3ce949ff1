"""The exchange of a minibatch's statistics in word slices (executors/dask.py): the shards' pieces
of each slice merged by themselves, and the merged slices put end to end, are the merged
minibatch bit for bit, for any number of slices."""

import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bigtopics.stats import StepResult, concatenated, merge_results, narrowed, slice_bounds, split_by_words

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


@settings(max_examples=100, deadline=None)
@given(shard_results(), st.booleans())
def test_a_result_crosses_the_wire_bit_for_bit_in_fewer_bytes(shards, counts):
    """Pickled as Dask sends it, a result comes back with the same dtypes and bits; ids and sums
    that are counts travel in 10 bytes an entry, not 24."""
    result = shards[0]
    if counts:
        result = StepResult(result.words, result.topics, np.floor(result.sums), result.divisor)
    back = pickle.loads(pickle.dumps(result, protocol=5))
    for name in ("words", "topics", "sums"):
        assert getattr(back, name).dtype == getattr(result, name).dtype, name
        assert getattr(back, name).tobytes() == getattr(result, name).tobytes(), name
    assert back.divisor == result.divisor
    if counts and len(result.words):
        wire = pickle.dumps(result, protocol=5, buffer_callback=lambda b: False)
        assert len(wire) < 10 * len(result.words) + 400


def test_values_that_do_not_fit_narrower_types_travel_as_they_are():
    for values in (np.array([2**40], np.int64), np.array([-1, 3], np.int64), np.array([0.1]), np.array([2.0**25 + 1])):
        assert narrowed(values).dtype == values.dtype
