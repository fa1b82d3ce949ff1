"""`bigtopics ingest`: text collections -> a store (bigtopics/store.py).

One tokenizing pass, parallel over worker processes; memory is bounded by the vocabulary:

1. The main process cuts the inputs into units (readers.InputReader) and feeds them to a bounded
   task queue. Each worker interns words into its own vocabulary (local ids), counts every
   unit's documents into CSR rows, accumulates per-word term counts and document frequencies,
   and spills the unit to a temporary file; it returns only a small summary. At the end each
   worker writes out its vocabulary. (workers.py)
2. The main process merges the vocabularies, prunes them (min_df, max_df, max_vocab), orders the
   kept words by frequency (ties by the word, so the result is deterministic) and builds a
   local -> final id map per worker. With a fixed vocabulary (`vocabulary=`, a store, run or
   model, for new text to infer with a trained model) the final ids are instead the word's ids
   in that vocabulary: words outside it are dropped and counted, and nothing is pruned.
   (vocabulary.py)
3. It streams the spilled units in input order: remap, drop pruned words, sort each row by word
   id, drop documents left empty, and append to a StoreWriter, which publishes atomically.
   (write.py)

The store does not depend on the number of workers or the unit size. `ingest()` (pipeline.py)
runs the three steps and returns an IngestReport (report.py); `describe_store` (describe.py) is
`bigtopics info` on a store.
"""

from .describe import describe_store
from .pipeline import ingest
from .report import IngestReport
from .vocabulary import FixedVocabulary, Pruning, read_vocabulary

__all__ = ["FixedVocabulary", "IngestReport", "Pruning", "describe_store", "ingest", "read_vocabulary"]
