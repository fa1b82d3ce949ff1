"""The `bigtopics` command line: a thin layer over the Python API.

Each command parses options, calls one API function, and turns the errors users can cause into
a one-line message, never a traceback (`--debug` shows it): exit status 2 for a usage error (an
option's value out of range, options that do not go together), 1 for a failure at run time (bad
input, missing or existing files, a full disk), 130 after Ctrl-C and 143 after SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys

import click
import numpy as np

from .command_errors import take_signals_and_warnings, user_errors
from .input_formats import FORMATS
from .local_steps import LOCAL_STEPS
from .options import parse_interval


class StoreLocation(click.ParamType):
    """A store (or document topics) given as a local directory that must exist, or as a URL
    (s3://, gs://, file://, ...) that is checked when it is opened."""

    name = "path or URL"

    def convert(self, value, param, ctx):
        from .locations import is_url

        if is_url(value):
            return value
        return click.Path(exists=True, file_okay=False).convert(value, param, ctx)


STORE = StoreLocation()


def storage_options_option(fn):
    """--storage-options JSON: the fsspec filesystem's options for URLs (credentials, endpoint)."""

    def parse(ctx, param, value):
        if value is None:
            return None
        try:
            options = json.loads(value)
        except ValueError as e:
            raise click.BadParameter(f"not JSON: {e}") from None
        if not isinstance(options, dict):
            raise click.BadParameter("give a JSON object, e.g. '{\"anon\": true}'")
        return options

    return click.option("--storage-options", callback=parse, metavar="JSON",
                        help="Options of the filesystem of s3:// and other URLs, as JSON (e.g. "
                             "'{\"endpoint_url\": \"http://127.0.0.1:9000\"}'); credentials also come from the "
                             "environment (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, ...).")(fn)


def topic_labels_option(where: str):
    """--topic-labels FILE, one option for every command that names topics (topic_labels.py reads
    and refuses the file alike for all); `where` says where that command shows the labels."""
    return click.option("--topic-labels", type=click.Path(exists=True, dir_okay=False),
                        help="Topic labels (default: each topic's top 3 words): one a line, topic 0 first, or "
                             f"TSV topic<TAB>label; {where}.")


# MALLET's options that bigtopics names otherwise (those that mean the same are accepted as
# aliases: --num-topics, --random-seed, --num-threads): given here, the error says what to use
# instead of click's closest spellings (--num-iterations suggested --num-threads).
MALLET_OPTIONS = {
    "--num-iterations": "its sweeps over the corpus are --epochs here (passes over the store; --burnin and "
                        "--samples are the sweeps per document)",
    "--beta": "the topic-word prior is --eta here",
    "--optimize-interval": "--optimize-alpha learns alpha here, updated every --optimize-every minibatches",
    "--num-top-words": "give --top-words (export, evaluate) or -n (topics)",
    "--output-state": "the state is written by bigtopics export --state",
    "--output-topic-keys": "topic keys are written by bigtopics export (topic_keys.tsv)",
    "--output-doc-topics": "document topics are bigtopics infer's, written as MALLET's by bigtopics export "
                           "--doc-topics",
}


class Command(click.Command):
    """A command whose error for one of MALLET_OPTIONS says what bigtopics has instead."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:
            if e.option_name not in MALLET_OPTIONS:
                raise
            raise click.NoSuchOption(e.option_name, f"No such option: {e.option_name} is MALLET's; "
                                     f"{MALLET_OPTIONS[e.option_name]}.", ctx=ctx) from None


class Commands(click.Group):
    command_class = Command


@click.group(cls=Commands)
@click.version_option(package_name="bigtopics")
def main():
    """Topic models for very large text collections on one machine."""
    take_signals_and_warnings()


# -- ingest and info ------------------------------------------------------------------------
@main.command()
@click.argument("inputs", nargs=-1, type=click.Path(exists=True))
@click.option("-o", "--output", required=True, help="The store to write: a directory, or a URL such as s3://bucket/books.zarr.")
@click.option("--files-from", default=None,
              help="Read the input paths from this file, one a line ('-': stdin), instead of INPUTS.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Input format (default: by extension: .jsonl/.json/.ndjson, .tsv, else txt).")
@click.option("--text-field", default="text", show_default=True, help="jsonl: the field holding the text.")
@click.option("--id-field", default="id", show_default=True, help="jsonl, bow-jsonl: the document id field.")
@click.option("--bow-field", default="counts", show_default=True, help="bow-jsonl: the {word: count} field.")
@click.option("--section-tokens", type=int, default=None, help="Cut documents into sections of about N tokens.")
@click.option("--min-length", type=int, default=3, show_default=True, help="Shortest token kept.")
@click.option("--token-pattern", default=None, help="Regular expression for a token (default: Unicode letter runs).")
@click.option("--stoplist", default="en", show_default=True, help="'en', 'none', or a file with one word per line.")
@click.option("--keep-case", is_flag=True, help="Do not lowercase.")
@click.option("--min-df", type=int, default=2, show_default=True, help="Drop words in fewer documents.")
@click.option("--max-df", type=float, default=0.5, show_default=True,
              help="Drop words in more than this fraction of documents.")
@click.option("--max-vocab", type=int, default=1 << 16, show_default=True,
              help="Keep the N most frequent words (0: all).")
@click.option("--vocabulary", "vocabulary_from", type=click.Path(exists=True, file_okay=False),
              help="Use the vocabulary (same word ids) of this store, run directory or model.zarr, e.g. to infer "
                   "new text with a trained model: other words are dropped, no pruning; the tokenizer options "
                   "default to the ones it records.")
@click.option("--skip-bad", is_flag=True,
              help="Skip (count and name) malformed lines, and files or folders that cannot be read whole, "
                   "instead of stopping.")
@click.option("--workers", type=int, default=0,
              help="Tokenizing processes (default: one per core it may use, given input enough).")
@click.option("--memory-limit", default=None,
              help="Memory for the vocabularies and buffers of all processes, e.g. 800M or 1.5G (default: a "
                   "quarter of the memory available, at most 1G); any number of distinct strings fits in it.")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@click.option("--quiet", is_flag=True, help="No progress output and no summary.")
@storage_options_option
@user_errors
def ingest(inputs, output, files_from, fmt, text_field, id_field, bow_field, section_tokens, min_length, token_pattern,
           stoplist, keep_case, min_df, max_df, max_vocab, vocabulary_from, skip_bad, workers, memory_limit, overwrite,
           quiet, storage_options):
    """Tokenize text files or directories INPUTS into a store for training (or, with
    --vocabulary, for inference with a model trained on another store)."""
    from dataclasses import replace

    from click.core import ParameterSource

    from .ingest import Pruning, read_vocabulary
    from .ingest import ingest as run_ingest
    from .input_formats import FormatOptions
    from .memory import parse_bytes
    from .tokenizer import TokenizerSettings

    if not inputs and files_from is None:
        raise click.UsageError("give INPUTS (files or folders) or --files-from")
    context = click.get_current_context()
    tokenizer_options = {"min_length": min_length, "token_pattern": token_pattern, "stoplist": stoplist,
                         "keep_case": keep_case}
    if vocabulary_from:
        given = [f"--{name.replace('_', '-')}" for name in ("min_df", "max_df", "max_vocab")
                 if context.get_parameter_source(name) != ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"{', '.join(given)} cannot be used with --vocabulary: the vocabulary is fixed, "
                                   "nothing is pruned")
        vocabulary, pruning = read_vocabulary(vocabulary_from), None
        tokenizer_options = {name: value for name, value in tokenizer_options.items()
                             if context.get_parameter_source(name) != ParameterSource.DEFAULT}
        tokenizer = replace(vocabulary.tokenizer, **tokenizer_options)  # its settings, unless overridden
    else:
        vocabulary, pruning = None, Pruning(min_df=min_df, max_df=max_df, max_vocab=max_vocab or None)
        tokenizer = TokenizerSettings(**tokenizer_options)
    report = run_ingest(
        list(inputs), output, tokenizer=tokenizer,
        formats=FormatOptions(format=fmt, text_field=text_field, id_field=id_field, bow_field=bow_field,
                              skip_bad=skip_bad),
        pruning=pruning, vocabulary=vocabulary,
        section_tokens=section_tokens, workers=workers, overwrite=overwrite, quiet=quiet,
        storage_options=storage_options, memory_limit=memory_limit and parse_bytes(memory_limit),
        files_from=files_from,
    )
    if not quiet:
        click.echo(report.summary(), err=True)


@main.command()
@click.argument("path", type=STORE)
@click.option("-n", "--top", "n_top", type=click.IntRange(min=1), default=30, show_default=True,
              help="Top words to list (stores).")
@storage_options_option
@user_errors
def info(path, n_top, storage_options):
    """Describe a store (sizes, compression, chunking, settings, top words) or a training run
    (settings, progress, checkpoints)."""
    from pathlib import Path

    from .ingest import describe_store
    from .locations import is_url
    from .model import load_model
    from .places import KINDS, output_kind
    from .rundir import SETTINGS_NAME, describe_model, describe_run
    from .store import open_store

    kind = None if is_url(path) else output_kind(Path(path))
    if (Path(path) / SETTINGS_NAME).exists():
        click.echo(describe_run(path))
    elif kind == "model":
        click.echo(describe_model(load_model(path)))
    elif kind in ("export", "site"):
        raise ValueError(f"{path} is {KINDS[kind]} (written by bigtopics {kind}); info describes a store, a "
                         "training run or a model")
    else:
        click.echo(describe_store(open_store(path, storage_options), n_top))


@main.command()
@click.option("--workdir", default="bigtopics-demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the demo writes its store and run.")
@click.option("-k", "--topics", "n_topics", default=20, show_default=True, help="Number of topics.")
@click.option("--epochs", default=5, show_default=True, help="Passes over the books.")
@user_errors
def demo(workdir, n_topics, epochs):
    """Ingest the built-in sample (24 public-domain Project Gutenberg books, cut into sections
    of about 500 tokens), train a model, and print its topics."""
    from importlib.resources import files
    from pathlib import Path

    from .ingest import ingest as run_ingest
    from .model import load_model
    from .settings import TrainSettings
    from .trainer import train as run_train

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    books = files("bigtopics") / "data" / "demo_books.jsonl.gz"
    store, run = workdir / "books.zarr", workdir / "run"
    click.echo(f"ingesting {books.name} into {store} ...", err=True)
    report = run_ingest([str(books)], store, section_tokens=500, overwrite=True, quiet=True)
    click.echo(report.summary(), err=True)
    click.echo(f"training {n_topics} topics for {epochs} epochs into {run} ...", err=True)
    run_train(store, run, TrainSettings(n_topics=n_topics, epochs=epochs, batch_size=256, tau0=1),
              overwrite=True)
    model = load_model(run)
    for k in np.argsort(-model.topic_totals(), kind="stable"):
        click.echo(f"{k:3d}  " + " ".join(w for w, _ in model.top_words(int(k), 10)))
    click.echo(f"\nnext: bigtopics info {run}; bigtopics topics {run}; bigtopics export {run} -o {workdir}/export",
               err=True)


# -- train and topics -----------------------------------------------------------------------


def local_step_options(fn):
    """One option for each local-step option of the registry (local_steps/), its help naming the
    steps it applies to; TrainSettings refuses one that does not apply to the chosen step."""
    owners: dict[str, list] = {}
    for name, step in LOCAL_STEPS.items():
        for f in step.options():
            owners.setdefault(f.name, []).append((name, f))
    for option_name, steps in reversed(list(owners.items())):
        first = steps[0][1]
        flag = first.metadata.get("flag")
        helps = {f.metadata["help"] for _, f in steps}
        text = (", ".join(name for name, _ in steps) + ": " + first.metadata["help"] if len(helps) == 1
                else "; ".join(f"{name}: {f.metadata['help']}" for name, f in steps))
        kind = click.Choice(first.metadata["choices"]) if "choices" in first.metadata else (None if flag else int)
        declarations = [flag] if flag else ["--" + option_name.replace("_", "-")]
        fn = click.option(*declarations, option_name, type=kind, default=None, help=text)(fn)
    return fn




@main.command()
@click.argument("store", required=False, type=STORE)
@click.option("-o", "--output", "run_dir", type=click.Path(file_okay=False),
              help="Run directory: settings, metrics log, checkpoints, table and model.")
@click.option("--resume", "resume_dir", type=click.Path(exists=True, file_okay=False),
              help="Continue this run from its newest good checkpoint (epochs, max-docs, workers and "
                   "checkpoint settings may change).")
@click.option("-k", "--topics", "--num-topics", "n_topics", type=int, help="Number of topics K.")
@click.option("--epochs", type=int, help="Passes over the store.  [default: 1]")
@click.option("--max-docs", type=int, help="Stop after this many documents in all.")
@click.option("--batch-size", type=int, help="Documents per minibatch.  [default: 1024; with --exclude-own 2048, "
              "fewer (at least 512) if the run would make under 200 minibatches]")
@click.option("--alpha", type=float, help="Document-topic prior of each topic (MALLET's --alpha is their sum: "
              "--alpha-sum).  [default: 5/K, as MALLET]")
@click.option("--alpha-sum", type=float, help="The document-topic prior summed over the topics, as MALLET's --alpha: "
              "alpha = alpha-sum / K.")
@click.option("--eta", type=float, help="Topic-word prior.  [default: 0.01; 0.5 with --beta-estimate geometric]")
@click.option("--optimize-alpha/--no-optimize-alpha", default=None,
              help="Learn an asymmetric alpha_k from the documents' topic counts (Minka's fixed point, as MALLET's "
                   "--optimize-interval; the variational steps: from E[log theta]), starting from --alpha.  "
                   "[default: on with gibbs --sampler word-major, buckets or alias]")
@click.option("--optimize-eta/--no-optimize-eta", default=None,
              help="Learn eta from the topic-word statistics, starting from --eta; mean estimate of beta only.  "
                   "[default: off]")
@click.option("--optimize-every", type=int, help="Minibatches between two updates of the learned priors.  [default: 1]")
@click.option("--optimize-burn-in", type=int, help="Minibatches before the first update of the learned priors.  "
              "[default: 20]")
@click.option("--optimize-passes", type=float,
              help="The learned priors average their fits over at least this many passes over the corpus; 0 moves "
                   "them at the topics' rate rho_t.  [default: 1 with --epochs above 1, else 0]")
@click.option("--min-alpha-sum", type=float,
              help="The learned alpha is kept summing to at least this (its shape still learned), each alpha_k "
                   "at least 1% of this / K; 0: neither.  "
                   "[default: the start's sum, K x --alpha]")
@click.option("--scale-docs", type=int,
              help="Documents kept out of training to fit the learned alpha's scale for new documents: the "
                   "model's alpha is the learned alpha_k times the factor that scores them best left to right; 0: "
                   "the learned alpha as it is.  [default: 1% of the documents not held out, at least 20 and at "
                   "most 1000; none from fewer than 1000 or without a learned alpha]")
@click.option("--local-step", type=click.Choice(list(LOCAL_STEPS)),
              help="Per-document inference: "
                   + "; ".join(f"{name}: {step.summary}" for name, step in LOCAL_STEPS.items())
                   + ".  [default: gibbs]")
@click.option("--kappa", type=float, help="Learning-rate decay, rho_t = (tau0 + t)^-kappa.  [default: 0.51]")
@click.option("--tau0", type=float, help="Learning-rate offset.  [default: 1]")
@local_step_options
@click.option("--shard-docs", type=int,
              help="Documents per shard when a cluster spreads one minibatch over several workers; part of the "
                   "model's settings for vb, lsparse and scvb0, whose float sums depend on the grouping (gibbs "
                   "gives the same model for any value).  [default: 0, one shard per minibatch]")
@click.option("--drop-below", type=float,
              help="At a table reset, drop entries with N[k,w] below this; the mass dropped is logged.  "
                   "[default: 0.01]")
@click.option("--reset-below", type=float,
              help="Rescale the table (and drop small entries) when pi_t falls below this.  [default: 1e-4]")
@click.option("--seed", "--random-seed", "seed", type=int, help="Fixes every random choice.  [default: 0]")
@click.option("--workers", "--num-threads", "workers", type=int,
              help="Sampler threads.  [default: all cores, fewer while other processes keep some busy]")
@click.option("--heldout", type=int, help="Hold this many documents out of training and report their "
              "left-to-right log-likelihood per token as training goes.  [default: 0]")
@click.option("--heldout-every", help="How often to score the held-out documents.  [default: 5m]")
@click.option("--checkpoint-every", help="Minibatches (200) or a duration (30m, 2h).  [default: 30m]")
@click.option("--keep-checkpoints", type=int, help="How many checkpoints to keep.  [default: 3]")
@click.option("--cluster", help="Train on a Dask LocalCluster of worker processes started here: local:N "
              "(needs pip install 'bigtopics[distributed]'; docs/distributed.md).")
@click.option("--scheduler", help="Train on a running Dask cluster: the scheduler's address, e.g. tcp://head:8786.")
@click.option("--snapshot-every", default="10m", show_default=True,
              help="Write model.zarr this often so `bigtopics topics` can read a run in progress.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run directory.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@storage_options_option
@user_errors
def train(store, run_dir, resume_dir, cluster, scheduler, snapshot_every, overwrite, quiet, storage_options, **given):
    """Train a topic model on STORE (written by `bigtopics ingest`), or resume a run."""
    from .settings import TrainSettings
    from .trainer import Trainer, summary

    given = {k: v for k, v in given.items() if v is not None}
    if "alpha_sum" in given:
        if "alpha" in given or "n_topics" not in given:
            raise click.UsageError("--alpha-sum needs -k (alpha = alpha-sum / K), and not --alpha")
        given["alpha"] = given.pop("alpha_sum") / max(given["n_topics"], 1)
    _, snapshot_seconds = parse_interval(snapshot_every, "snapshot interval")
    if snapshot_seconds is None:
        raise click.BadParameter("give a duration such as 10m", param_hint="--snapshot-every")
    if cluster and scheduler:
        raise click.UsageError("give --cluster or --scheduler, not both")
    options = {"snapshot_seconds": snapshot_seconds, "cluster": cluster, "scheduler": scheduler,
               "storage_options": storage_options}
    if resume_dir:
        if run_dir or overwrite:
            raise click.UsageError("--resume takes the run directory, and STORE only if the store has moved "
                                   "(no -o or --overwrite)")
        trainer = Trainer.resume(resume_dir, quiet=quiet, options=options, store=store, **given)
        run_dir = resume_dir
        if not quiet and trainer.state.docs_seen < trainer.docs_limit():
            st = trainer.state
            click.echo(f"resuming {resume_dir} from {trainer.resumed_from.path.name} "
                       f"(epoch {st.epoch}, minibatch {st.step}, {st.docs_seen:,} documents seen)", err=True)
    else:
        if not store or not run_dir or "n_topics" not in given:
            raise click.UsageError("give STORE, -o RUN_DIR and -k TOPICS (or --resume RUN_DIR)")
        trainer = Trainer(store, run_dir, TrainSettings(**given), quiet=quiet, **options)
    if not quiet and trainer.executor.where():
        click.echo(f"training {trainer.executor.where()}", err=True)
    model_path = trainer.run(overwrite=overwrite)
    if trainer.already_finished:
        click.echo(f"{run_dir} has already finished ({trainer.state.docs_seen:,} documents seen); "
                   "give --epochs or --max-docs beyond that to train further", err=True)
        return
    if trainer.stop_signal is not None:
        click.echo(f"stopped at minibatch {trainer.state.step} with a checkpoint; continue with:\n"
                   f"    bigtopics train --resume {run_dir}", err=True)
        sys.exit(143 if trainer.stop_signal == signal.SIGTERM else 130)
    if not quiet:
        click.echo(summary(trainer), err=True)
        click.echo(f"model: {model_path}   (top words: bigtopics topics {run_dir})", err=True)


@main.command()
@click.argument("run", type=click.Path(exists=True))
@click.option("-n", "--words", "n_words", type=click.IntRange(min=1), default=10, show_default=True,
              help="Words per topic.")
@click.option("--sort", type=click.Choice(["id", "size", "alpha"]), default="id", show_default=True,
              help="List topics by number, by size (tokens), or by alpha_k (learned with train --optimize-alpha; "
                   "then alpha_k is shown before the share, as MALLET's topic keys show it).")
@user_errors
def topics(run, n_words, sort):
    """Print the top words of every topic of a finished run or a run in progress."""
    from .model import load_model

    model = load_model(run)
    totals = model.topic_totals()
    share = totals / max(totals.sum(), 1e-300)
    alpha = model.alpha_k
    order = {"size": lambda: np.argsort(-totals, kind="stable"), "alpha": lambda: np.argsort(-alpha, kind="stable"),
             "id": lambda: np.arange(model.n_topics)}[sort]()
    for k in order:
        words = " ".join(w for w, _ in model.top_words(int(k), n_words))
        click.echo(f"{k}\t" + (f"{alpha[k]:.4g}\t" if sort == "alpha" else "") + f"{share[k]:.4f}\t{words}")


# -- evaluate, infer and export ---
@main.command()
@click.argument("run", type=click.Path(exists=True))
@click.option("--store", type=STORE,
              help="Store for coherence and document shares (default: the run's training store).")
@click.option("--heldout-store", type=STORE,
              help="Store of held-out documents (the model's vocabulary) to score.")
@click.option("--heldout-docs", type=int, default=1000, show_default=True, help="Held-out documents scored.")
@click.option("--method", "methods", type=click.Choice(["left-to-right", "completion"]), multiple=True,
              help="Held-out method (repeatable; default: both).")
@click.option("--particles", type=int, default=10, show_default=True, help="Left-to-right particles.")
@click.option("--no-resample", is_flag=True,
              help="Left-to-right without resampling (linear, not quadratic, in length).")
@click.option("--doc-topics", type=STORE,
              help="Output of `bigtopics infer` for the document shares (else a sample is inferred).")
@click.option("--top-words", type=int, default=10, show_default=True, help="Top words for coherence (2 to 1000).")
@click.option("--prominence", type=float, default=0.1, show_default=True,
              help="A topic is prominent in a document with at least this proportion (in [0, 1)).")
@click.option("--sample-docs", type=int, default=2000, show_default=True,
              help="Documents inferred for the shares when --doc-topics is not given.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="JSON file (default: RUN/evaluation.json); an earlier evaluation there is replaced.")
@click.option("--overwrite", is_flag=True, help="Replace an existing file that is not an earlier evaluation.")
@click.option("--seed", "--random-seed", "seed", type=int, default=0, show_default=True, help="In [0, 2**63).")
@click.option("--workers", "--num-threads", "workers", type=int, default=0, help="Threads (default: all cores).")
@click.option("--cluster",
              help="Infer the sampled and held-out documents on a Dask LocalCluster started here: local:N.")
@click.option("--scheduler", help="Infer them on a running Dask cluster: the scheduler's address.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@storage_options_option
@user_errors
def evaluate(run, store, heldout_store, heldout_docs, methods, particles, no_resample, doc_topics, top_words,
             prominence, sample_docs, output, overwrite, seed, workers, cluster, scheduler, quiet, storage_options):
    """Topic diagnostics of RUN (coherence, size, entropy, document shares) and held-out scores."""
    from .evaluate import METHODS, format_table
    from .evaluate import evaluate as run_evaluate

    result = run_evaluate(run, store=store, heldout_store=heldout_store, doc_topics=doc_topics, output=output,
                          heldout_docs=heldout_docs, methods=methods or METHODS, particles=particles,
                          resample=not no_resample, top_n=top_words, prominence_threshold=prominence,
                          sample_docs=sample_docs, seed=seed, workers=workers, quiet=quiet,
                          storage_options=storage_options, overwrite=overwrite, cluster=cluster,
                          scheduler=scheduler)
    click.echo(format_table(result))
    if not quiet:
        if result["store"] is None:
            click.echo("note: no store (the model has no run beside it): coherence and document shares need "
                       "--store", err=True)
        click.echo(f"written: {result['output']}", err=True)


@main.command()
@click.argument("run", type=click.Path(exists=True))
@click.argument("store", type=STORE)
@click.option("-o", "--output", required=True, help="doc_topics.zarr to write (a path or a URL).")
@click.option("--threshold", type=float, default=0.0, show_default=True,
              help="Smallest proportion kept (in [0, 1)); 0 keeps every topic a document was assigned.")
@click.option("--burnin", type=int, default=4, show_default=True, help="Gibbs sweeps discarded per document.")
@click.option("--samples", type=int, default=4, show_default=True, help="Gibbs sweeps averaged per document.")
@click.option("--seed", "--random-seed", "seed", type=int, default=0, show_default=True, help="In [0, 2**63).")
@click.option("--workers", "--num-threads", "workers", type=int, default=0,
              help="Sampler threads (default: all cores).")
@click.option("--part-tokens", type=int, default=1 << 23, show_default=True,
              help="Tokens per resumable part (work lost to an interruption is at most one part).")
@click.option("--cluster", help="Infer on a Dask LocalCluster of worker processes started here: local:N.")
@click.option("--scheduler", help="Infer on a running Dask cluster: the scheduler's address.")
@click.option("--overwrite", is_flag=True, help="Replace earlier document topics (never a store or other output).")
@click.option("--quiet", is_flag=True, help="No progress output.")
@storage_options_option
@user_errors
def infer(run, store, output, threshold, burnin, samples, seed, workers, part_tokens, cluster, scheduler, overwrite,
          quiet, storage_options):
    """Topic proportions of every document of STORE under the model of RUN (resumable: rerun
    the same command after an interruption)."""
    from .infer import InferSettings
    from .infer import infer as run_infer

    summary = run_infer(run, store, output, InferSettings(threshold, burnin, samples, seed, workers),
                        overwrite=overwrite, quiet=quiet, part_tokens=part_tokens, storage_options=storage_options,
                        cluster=cluster, scheduler=scheduler)
    if not quiet:
        reused = f", {summary['parts_reused']} blocks reused from an interrupted run" if summary["parts_reused"] else ""
        if summary["parts_damaged"]:
            reused += f", {summary['parts_damaged']} damaged blocks of it computed again"
        click.echo(f"inferred {summary['n_docs']:,} documents ({summary['nnz']:,} topic weights){reused}: "
                   f"{summary['output']}", err=True)


@main.command()
@click.argument("run", type=click.Path(exists=True))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="Directory to write.")
@click.option("--doc-topics", type=STORE,
              help="Output of `bigtopics infer`, for the per-document files.")
@click.option("--store", type=STORE,
              help="The store --doc-topics was inferred from (default: the one it records).")
@click.option("--top-words", type=int, default=20, show_default=True, help="Words per topic in the keys files.")
@click.option("--index", default="bigtopics", show_default=True, help="Elasticsearch/OpenSearch index name.")
@click.option("--doc-topics-threshold", type=float, default=0.0, show_default=True,
              help="As MALLET: 0 writes doc_topics.txt dense (every topic, in order); above 0, sparse "
                   "(topic proportion pairs, largest first, those at least this).")
@click.option("--doc-topics-max", type=int, default=-1, show_default=True,
              help="As MALLET: at most this many topics per document in the sparse doc_topics.txt (-1: all).")
@click.option("--topic-word-weights", is_flag=True,
              help="Also write topic_word_weights.txt (MALLET's --topic-word-weights-file: K x V lines).")
@click.option("--state", is_flag=True,
              help="Also write state.gz (MALLET's --output-state: every token's topic) and state_instances.txt "
                   "(the text MALLET imports to load it), for runs trained with --exclude-own.")
@click.option("--diagnostics", is_flag=True,
              help="Also write diagnostics.xml (MALLET's --diagnostics-file), for runs trained with --exclude-own.")
@topic_labels_option("in topics.jsonl and dfr-browser")
@click.option("--overwrite", is_flag=True,
              help="Replace an earlier export (never a store or run, nor a folder holding files export did not write).")
@storage_options_option
@user_errors
def export(run, output, doc_topics, store, top_words, index, doc_topics_threshold, doc_topics_max, topic_word_weights,
           state, diagnostics, topic_labels, overwrite, storage_options):
    """Write RUN's topics (and inferred document topics) as MALLET, search-engine, pyLDAvis and
    dfr-browser files (docs/formats.md)."""
    from .export import ExportOptions
    from .export import export as run_export

    options = ExportOptions(top_words=top_words, index=index, doc_topics_threshold=doc_topics_threshold,
                            doc_topics_max=doc_topics_max, topic_word_weights=topic_word_weights, state=state,
                            diagnostics=diagnostics, topic_labels=topic_labels)
    names = run_export(run, output, doc_topics=doc_topics, store=store, options=options, overwrite=overwrite,
                       storage_options=storage_options)
    click.echo(f"{output}: {', '.join(names)}", err=True)


@main.command()
@click.argument("run", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="HTML file (default: RUN/report.html).")
@click.option("--doc-topics", type=STORE,
              help="Output of `bigtopics infer`, to list the documents most about each topic.")
@click.option("--store", type=STORE,
              help="The store --doc-topics was inferred from, for document ids (default: the one it records).")
@topic_labels_option("beside each topic's number")
@click.option("--overwrite", is_flag=True, help="Replace an existing file that is not an earlier report.")
@storage_options_option
@user_errors
def report(run, output, doc_topics, store, topic_labels, overwrite, storage_options):
    """Write a self-contained HTML page describing RUN: topics, sizes, coherence, documents, training curve."""
    from .report import build_report

    path = build_report(run, output, doc_topics=doc_topics, store=store, topic_labels=topic_labels,
                        overwrite=overwrite, storage_options=storage_options)
    click.echo(f"written: {path}", err=True)


@main.command()
@click.argument("run", type=click.Path(exists=True, file_okay=False))
@click.option("--doc-topics", type=STORE, required=True, help="Output of `bigtopics infer` for the documents.")
@click.option("--store", type=STORE, help="The store --doc-topics was inferred from (default: the one it records).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="Folder to write.")
@click.option("--words", type=int, default=30, show_default=True, help="Top words on each topic's page.")
@click.option("--top-books", type=int, default=25, show_default=True,
              help="Books (documents in a store without sections) listed on each topic's page.")
@topic_labels_option("beside each topic's number on every page, and in topics.csv")
@click.option("--overwrite", is_flag=True, help="Replace an earlier site (never a folder holding other files).")
@click.option("--quiet", is_flag=True, help="No progress output.")
@storage_options_option
@user_errors
def site(run, doc_topics, store, output, words, top_books, topic_labels, overwrite, quiet, storage_options):
    """Write a static website (open OUTPUT/index.html, or serve the folder) to browse RUN's topics
    and the documents of --doc-topics: a page per topic and per book, search, CSV downloads."""
    from .site import build_site

    result = build_site(run, output, doc_topics=doc_topics, store=store, n_words=words, n_books=top_books,
                        topic_labels=topic_labels, overwrite=overwrite, quiet=quiet, storage_options=storage_options)
    if not quiet:
        click.echo(f"written: {result['output']}/index.html ({result['n_topics']} topics, {result['n_books']:,} "
                   f"books, {result['n_docs']:,} documents)", err=True)


if __name__ == "__main__":
    main()
