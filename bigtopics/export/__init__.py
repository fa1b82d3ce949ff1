"""Export a model (and inferred document topics) in the formats other tools read unchanged.

One module per format, each with its WRITERS (base.Writer: the files, the function, what it needs
and the option that turns it on); WRITERS here is their registry, in the order they run:

  model_files  topic_word.zarr (anndata CSR, dimension_names for xarray), vocab.txt, topics.jsonl
  mallet       topic_keys.tsv, word_topic_counts.txt, topic_word_weights.txt (opt-in),
               doc_topics.txt (dense as MALLET's default; sparse with a threshold)
  state        state.gz, MALLET's --output-state, and state_instances.txt, the text MALLET imports
               to load it (opt-in; runs that keep per-token topics)
  mallet_diagnostics  diagnostics.xml, MALLET's --diagnostics-file (opt-in; the same runs)
  pyldavis     pyldavis.json, pyLDAvis.prepare's arguments with the model's numbers
  dfr          dfr-browser/, a complete dfr-browser data folder
  search       search.jsonl, search_solr.jsonl (Elasticsearch/OpenSearch, Solr)

The files needing document topics are written with --doc-topics (output of `bigtopics infer`)
and the store it was inferred from. Everything is written by streaming topics, words or document
blocks; the largest thing held is one block of documents, or what each module's docstring bounds.
The folder is written under a temporary name and published whole (atomic.publish_dir).
docs/formats.md describes every file.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from ..atomic import clear_leftovers, publish_dir, temporary_sibling
from ..diagnostics import top_word_ids
from ..doc_topics import DocTopics
from ..evaluate import current_evaluation
from ..model import load_model
from ..options import OptionError, check_applies, check_integer, check_real
from ..outputs import check_output
from ..topic_labels import topic_labels
from . import dfr, mallet, mallet_diagnostics, model_files, pyldavis, search, state
from .base import ExportContext, ExportOptions, Writer
from .dfr import write_dfr_doc_topics
from .search import RESERVED, search_names
from .sizes import check_export_size, check_top_words_memory
from .text import escape_id, escape_word, text_ids, unescape

WRITERS: tuple[Writer, ...] = (*model_files.WRITERS, *mallet.WRITERS, *state.WRITERS, *mallet_diagnostics.WRITERS,
                               *pyldavis.WRITERS, *dfr.WRITERS, *search.WRITERS)
MAX_TOP_WORDS = 100_000

__all__ = ["ExportOptions", "RESERVED", "WRITERS", "escape_id", "escape_word", "export", "search_names", "text_ids",
           "unescape", "write_dfr_doc_topics"]


def export(run, output, *, doc_topics=None, store=None, options: ExportOptions | None = None, overwrite: bool = False,
           log=None, storage_options: dict | None = None, **option_values) -> list[str]:
    """Write every export of a run into the directory `output` (published atomically) and return
    the names written. `options` (or its fields as keywords: top_words=20, index="bigtopics",
    doc_topics_threshold=0.0, doc_topics_max=-1, topic_word_weights=False, state=False,
    diagnostics=False, topic_labels=None: a labels file, topic_labels.py) choose the files and
    their forms; notices (renamed metadata fields, a stale evaluation.json, a file left out) go to
    `log` (default: stderr). `doc_topics` and `store` may be
    URLs (`storage_options` for them; bigtopics/locations.py); `output` is local."""
    log = log or (lambda msg: print(msg, file=sys.stderr))
    options = options or ExportOptions(**option_values)
    check_integer(options.top_words, "--top-words", 1, MAX_TOP_WORDS)
    check_real(options.doc_topics_threshold, "--doc-topics-threshold", 0.0, 1.0)
    if doc_topics is None:  # the options of doc_topics.txt and of the store it was inferred from
        check_applies([f"--doc-topics-threshold {options.doc_topics_threshold:g}"] * (options.doc_topics_threshold != 0)
                      + [f"--doc-topics-max {options.doc_topics_max}"] * (options.doc_topics_max != -1)
                      + [f"--store {store}"] * (store is not None), "--doc-topics")
    run = Path(run)
    model = load_model(run)
    check_integer(options.doc_topics_max, "--doc-topics-max", -1)
    check_top_words_memory(model.n_topics, model.n_words, options)
    for flag, asked in (("--state", options.state), ("--diagnostics", options.diagnostics)):
        if asked and not state.has_assignments(run):
            raise OptionError(state.NO_ASSIGNMENTS.format(flag=flag, run=run))
    output = Path(output)
    clear_leftovers(output, log, "export")  # what an export killed earlier left beside it
    check_output(output, overwrite, [p for p in (model.path, doc_topics, store) if p], kind="export")
    ctx = export_context(run, model, options, doc_topics=doc_topics, store=store, log=log,
                         storage_options=storage_options)
    writers = [writer for writer in WRITERS if wanted(writer, ctx)]
    check_export_size(ctx, {name for writer in writers for name in writer.files}, output.parent)
    tmp = temporary_sibling(output)
    tmp.mkdir(parents=True)
    try:
        for writer in writers:
            writer.write(ctx, tmp)
        publish_dir(tmp, output, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sorted(p.name for p in output.iterdir())


def export_context(run: Path, model, options: ExportOptions, *, doc_topics=None, store=None, log,
                   storage_options: dict | None = None) -> ExportContext:
    """What every writer is given: the model, its top words and diagnostics, and the document
    topics with the store they were inferred from, when given."""
    dt = DocTopics(doc_topics, storage_options) if doc_topics else None
    opened = dt.source_store(store, model.n_topics, storage_options) if dt is not None else None
    return ExportContext(run=run, model=model, options=options, diagnostics=_diagnostics(run, model, log), log=log,
                         dt=dt, store=opened, storage_options=storage_options,
                         top=[top_word_ids(model, k, options.top_words) for k in range(model.n_topics)],
                         labels=topic_labels(model, options.topic_labels))


def wanted(writer: Writer, ctx: ExportContext) -> bool:
    """Whether the export writes `writer`'s files: its option is on and what it needs is there."""
    if writer.option is not None and not getattr(ctx.options, writer.option):
        return False
    if writer.needs == "doc_topics":
        return ctx.dt is not None
    if writer.needs == "assignments":
        return state.has_assignments(ctx.run)
    return True


def _diagnostics(run, model, log) -> dict[int, dict]:
    """Per-topic diagnostics from <run>/evaluation.json (`bigtopics evaluate`), if it scored this model."""
    evaluation, notice = current_evaluation(run, model)
    if notice:
        log(notice)
    skip = {"topic", "top_words"}
    return {k: {key: v for key, v in r.items() if key not in skip} for k, r in evaluation.items()}
