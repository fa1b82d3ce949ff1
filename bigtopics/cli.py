"""The `bigtopics` command line: a thin layer over the Python API.

Each command parses options, calls one API function, and turns the errors users can cause
(bad input, missing files, wrong settings) into a one-line message and exit status 2, never a
traceback.
"""

from __future__ import annotations

import functools
import sys

import click
import numpy as np

from .store import StoreError


def user_errors(fn):
    """Report anticipated errors as `error: ...` on stderr with exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (StoreError, FileExistsError, FileNotFoundError, ValueError, OSError) as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)

    return wrapper


@click.group()
@click.version_option(package_name="bigtopics")
def main():
    """Topic models for very large text collections on one machine."""


# -- ingest and info ------------------------------------------------------------------------


# -- train and topics -----------------------------------------------------------------------


def _duration_seconds(text: str) -> float:
    """'90s', '10m', '2h' or a number of seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    text = text.strip().lower()
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


@main.command()
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--output", "run_dir", required=True, type=click.Path(file_okay=False),
              help="Run directory: settings, metrics log, table and model.")
@click.option("-k", "--topics", "n_topics", type=int, required=True, help="Number of topics K.")
@click.option("--epochs", type=int, default=1, show_default=True, help="Passes over the store.")
@click.option("--max-docs", type=int, default=None, help="Stop after this many documents.")
@click.option("--batch-size", type=int, default=1024, show_default=True, help="Documents per minibatch.")
@click.option("--alpha", type=float, default=0.1, show_default=True, help="Document-topic prior.")
@click.option("--eta", type=float, default=0.5, show_default=True, help="Topic-word prior.")
@click.option("--kappa", type=float, default=0.6, show_default=True, help="Learning-rate decay.")
@click.option("--tau0", type=float, default=64.0, show_default=True, help="Learning-rate offset.")
@click.option("--burnin", type=int, default=2, show_default=True, help="Gibbs sweeps discarded per document.")
@click.option("--samples", type=int, default=2, show_default=True, help="Gibbs sweeps averaged per document.")
@click.option("--drop-below", type=float, default=0.01, show_default=True,
              help="At a table reset, drop entries with N[k,w] below this (the mass dropped is logged).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=int, default=0, help="Sampler threads (default: all cores).")
@click.option("--snapshot-every", default="10m", show_default=True,
              help="Write model.zarr this often so `bigtopics topics` can read a run in progress.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run directory.")
@click.option("--quiet", is_flag=True, help="No progress output.")
@user_errors
def train(store, run_dir, n_topics, epochs, max_docs, batch_size, alpha, eta, kappa, tau0, burnin, samples,
          drop_below, seed, workers, snapshot_every, overwrite, quiet):
    """Train a topic model on STORE (written by `bigtopics ingest`)."""
    from .memory import format_bytes, peak_rss_bytes
    from .trainer import TrainSettings, Trainer

    settings = TrainSettings(
        n_topics=n_topics, alpha=alpha, eta=eta, kappa=kappa, tau0=tau0, batch_size=batch_size, burnin=burnin,
        samples=samples, seed=seed, epochs=epochs, max_docs=max_docs, drop_below=drop_below, workers=workers,
    )
    trainer = Trainer(store, run_dir, settings, quiet=quiet, snapshot_seconds=_duration_seconds(snapshot_every))
    model_path = trainer.run(overwrite=overwrite)
    st = trainer.state
    if not quiet:
        click.echo(
            f"trained {n_topics} topics on {st.docs_seen:,} documents ({st.tokens_seen:,} tokens) in "
            f"{st.seconds:.1f} s ({st.tokens_seen / max(st.seconds, 1e-9):,.0f} tokens/s); "
            f"table {trainer.table.n_entries:,} entries, peak memory {format_bytes(peak_rss_bytes())}",
            err=True,
        )
        click.echo(f"model: {model_path}   (top words: bigtopics topics {run_dir})", err=True)


@main.command()
@click.argument("run", type=click.Path(exists=True))
@click.option("-n", "--words", "n_words", type=int, default=10, show_default=True, help="Words per topic.")
@click.option("--sort", type=click.Choice(["id", "size"]), default="id", show_default=True,
              help="List topics by number or by size (tokens).")
@user_errors
def topics(run, n_words, sort):
    """Print the top words of every topic of a finished run or a run in progress."""
    from .model import load_model

    model = load_model(run)
    totals = model.topic_totals
    share = totals / max(totals.sum(), 1e-300)
    order = np.argsort(-totals, kind="stable") if sort == "size" else np.arange(model.n_topics)
    for k in order:
        words = " ".join(w for w, _ in model.top_words(int(k), n_words))
        click.echo(f"{k}\t{share[k]:.4f}\t{words}")


if __name__ == "__main__":
    main()
