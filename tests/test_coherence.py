"""NPMI and C_V coherence against gensim's CoherenceModel on the same top words and documents."""

import numpy as np
import pytest

from bigtopics.diagnostics import cv_coherence, npmi_coherence, umass_coherence
from bigtopics.store import open_store

gensim = pytest.importorskip("gensim")


def test_npmi_and_cv_match_gensim_with_documents_as_windows(demo_store):
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    store = open_store(demo_store)
    by_df = np.argsort(-store.doc_freqs, kind="stable")
    rng = np.random.default_rng(5)
    # topics of frequent words, of words from across the range, and one with a word in 2 documents
    top = np.stack([by_df[:10], by_df[10:20], rng.choice(by_df[:2000], 10, replace=False),
                    rng.choice(by_df[:300], 10, replace=False),
                    np.concatenate([by_df[:9], [np.flatnonzero(store.doc_freqs == 2)[0]]])])
    _, counts = umass_coherence(store, top)
    # gensim counts co-occurrence in sliding windows and skips texts shorter than the window: each
    # document's distinct words padded to one length, with that window, make one window a document
    block = store.read_docs(0, store.n_docs)
    docs = [[str(w) for w in store.vocab[block.row(d)[0]]] for d in range(store.n_docs)]
    assert all(docs)  # (an empty document would be a window to bigtopics, none to gensim)
    width = max(map(len, docs))
    texts = [words + ["_pad_"] * (width - len(words)) for words in docs]
    dictionary = Dictionary(texts)
    topics = [[str(w) for w in store.vocab[row]] for row in top]
    for measure, ours in (("c_npmi", npmi_coherence(counts)), ("c_v", cv_coherence(counts))):
        theirs = CoherenceModel(topics=topics, texts=texts, dictionary=dictionary, coherence=measure,
                                window_size=width, processes=1).get_coherence_per_topic()
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9, err_msg=measure)
    assert np.all(np.abs(npmi_coherence(counts)) <= 1) and np.all(np.abs(cv_coherence(counts)) <= 1)
    # frequent words that occur together score above words drawn from across the vocabulary
    assert npmi_coherence(counts)[0] > npmi_coherence(counts)[2]
