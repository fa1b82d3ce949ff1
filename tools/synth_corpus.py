"""Write a synthetic LDA corpus (a bigtopics store or JSON Lines text) and its true topics.

    python tools/synth_corpus.py OUT --docs 1000000 --topics 100 --vocab 50000 --mean-length 100

See tools/README.md and bigtopics/synth.py.
"""

from __future__ import annotations

import click

from bigtopics.cli import user_errors
from bigtopics.memory import format_bytes, peak_rss_bytes
from bigtopics.synth import BASE_MEASURES, FORMATS, TOKENS_PER_BLOCK, CorpusSpec, truth_path, write_corpus


@click.command()
@click.argument("out", type=click.Path(dir_okay=True, writable=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="store", show_default=True,
              help="store: a bigtopics store; jsonl: {\"id\", \"text\"} lines, gzipped if OUT ends in .gz")
@click.option("--docs", "n_docs", type=click.IntRange(min=1), required=True, help="number of documents")
@click.option("--topics", "n_topics", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--vocab", "n_words", type=click.IntRange(min=2), default=50_000, show_default=True,
              help="vocabulary size")
@click.option("--mean-length", type=click.FloatRange(min=1), default=100.0, show_default=True,
              help="mean tokens per document (1 + Poisson(mean - 1))")
@click.option("--alpha", type=click.FloatRange(min=0, min_open=True), default=0.1, show_default=True,
              help="document-topic Dirichlet parameter (the mean alpha_k with --alpha-skew)")
@click.option("--alpha-skew", type=click.FloatRange(min=0, max=10), default=0.0, show_default=True,
              help="an asymmetric prior: alpha_k proportional to (k + 1)^-skew, summing to K alpha "
                   "(truth: alpha.npy); 0 is symmetric")
@click.option("--eta", type=click.FloatRange(min=0, min_open=True), default=0.01, show_default=True,
              help="topic-word Dirichlet parameter")
@click.option("--base", type=click.Choice(BASE_MEASURES), default="uniform", show_default=True,
              help="the topics' Dirichlet base measure: uniform (LDA's symmetric Dirichlet(eta)), or zipf: "
                   "Dirichlet(V eta m) around one Zipfian m, so every topic gives the frequent words high probability")
@click.option("--zipf-exponent", type=click.FloatRange(min=0, max=10, min_open=True), default=1.0, show_default=True,
              help="--base zipf: m_w proportional to rank^-exponent")
@click.option("--seed", type=click.IntRange(min=0, max=2**63 - 1), default=0, show_default=True)
@click.option("--tokens-per-block", type=click.IntRange(min=1), default=TOKENS_PER_BLOCK, show_default=True,
              help="tokens drawn per block (memory; the output does not depend on it)")
@click.option("--overwrite", is_flag=True, help="replace OUT and OUT.truth if they exist")
@click.option("--quiet", is_flag=True, help="no progress output")
@user_errors
def main(out, fmt, n_docs, n_topics, n_words, mean_length, alpha, alpha_skew, eta, base, zipf_exponent, seed,
         tokens_per_block, overwrite, quiet):
    """Draw a corpus from the LDA generative process into OUT, its true parameters into OUT.truth/."""
    spec = CorpusSpec(n_docs=n_docs, n_topics=n_topics, n_words=n_words, mean_length=mean_length,
                      alpha=alpha, eta=eta, seed=seed, base=base, zipf_exponent=zipf_exponent, alpha_skew=alpha_skew)
    summary = write_corpus(spec, out, fmt, overwrite=overwrite, quiet=quiet, tokens_per_block=tokens_per_block)
    click.echo(
        f"wrote {out} ({fmt}): {summary['n_docs']:,} documents, {summary['n_tokens']:,} tokens "
        f"in {summary['seconds']:.1f} s ({summary['tokens_per_second']:,} tokens/s, "
        f"peak memory {format_bytes(peak_rss_bytes())}); true parameters in {truth_path(out)}"
    )


if __name__ == "__main__":
    main()
