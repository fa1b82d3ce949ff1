"""`bigtopics ingest`: text collections -> a store (bigtopics/store.py).

One tokenizing pass, parallel over worker processes; memory is bounded by a budget (psutil, or
`memory_limit`), whatever the number of documents, files or distinct strings:

1. The main process cuts the inputs into units (inputs.InputReader) and feeds them to a bounded
   task queue. Each worker interns words into its own vocabulary (local ids), counts every
   unit's documents into CSR rows, accumulates per-word term counts and document frequencies,
   and spills the unit to a temporary file; it returns only a small summary. When its
   vocabulary outgrows its share of the budget, and at the end, a worker spills it as a run
   (words, counts, ordered by hash) and starts a new one. (workers.py, runs.py)
2. The main process merges the runs from disk, a group of hash partitions at a time, with exact
   counts; prunes the words (min_df, max_df, max_vocab) and orders the kept ones by frequency
   (ties by the word, so the result is deterministic), keeping as Python strings only the words
   that can still make the cut. With a fixed vocabulary (`vocabulary=`, a store, run or model,
   for new text to infer with a trained model) the final ids are instead the word's ids in that
   vocabulary: words outside it are dropped and counted, and nothing is pruned. Each run then
   gets its local -> store id map. (vocabulary.py, runs.py)
3. It streams the spilled units in input order: remap, drop pruned words, sort each row by word
   id, drop documents left empty, and append to a StoreWriter, which publishes atomically.
   (write.py)

The store does not depend on the number of workers, the unit size or the memory budget, nor on
whether the ingest was interrupted and resumed: the spills of a local store's ingest are kept in a
hidden sibling folder that a rerun of the same command checks and continues from (resume.py). `ingest()` (pipeline.py)
runs the three steps and returns an IngestReport (report.py); `describe_store` (describe.py) is
`bigtopics info` on a store.
"""

from .describe import describe_store
from .pipeline import ingest
from .summary import IngestReport
from .vocabulary import FixedVocabulary, Pruning, read_vocabulary

__all__ = ["FixedVocabulary", "IngestReport", "Pruning", "describe_store", "ingest", "read_vocabulary"]
