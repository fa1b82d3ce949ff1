"""Learned priors (issue 25): held-out scores and coherence with and without them, against
tomotopy with its default optim_interval=10 and with 0, at equal wall time.

    python benchmarks/bench_priors.py -k 100 -k 1000 --seconds 60
    python benchmarks/bench_priors.py --update-cost -k 2000
    python benchmarks/bench_priors.py -k 200 --epochs 1 --store <store> --systems bigtopics

Every system trains in this process on the training store of benchmarks/peers.py's split (the
same held-out documents as bench_peers.py) until --seconds of training have passed, checked after
each minibatch (bigtopics) or Gibbs sweep (tomotopy); then its topics p(w|k) and its own prior
(alpha_k, learned or not) are scored by the one evaluator: left-to-right (no resampling) and
document completion log-likelihood per held-out token, mean UMass coherence of the top 10
words on the training store, and how many distinct top-10 sets the topics have; on a synthetic
store with its true topics beside it (`<store>.truth`, tools/synth_corpus.py), also their
recovery (peers.recovery: the mean best-match cosine). Systems:

  bigtopics          its defaults: alpha learned from 5/K (--optimize-alpha), eta 0.01
  bigtopics-fixed    --no-optimize-alpha: alpha 5/K and eta 0.01, fixed
  bigtopics-learned  --optimize-alpha --optimize-eta
  bigtopics-alpha    --optimize-alpha (for local steps where it is not the default)
  tomotopy           tp.LDAModel defaults (alpha 0.1, eta 0.01), optim_interval=10 (its default)
  tomotopy-fixed     the same with optim_interval=0

--step KEY=VALUE (repeatable) gives the bigtopics systems a local step and its options, e.g.
`--step local_step=vb` or `--step sampler=alias` (TrainSettings' names).

--epochs N trains the bigtopics systems for N whole epochs with the defaults `train --epochs N`
gives them (one epoch: learned alpha at rho_t, no exclude-own) instead of for --seconds, and
prints alpha_0 at steps 1, 2, 4, ... (how the learned prior moves through a long epoch).

--train-docs N trains every system on a seeded sample of N of the documents not held out (the
same held-out documents): how an effect follows the corpus's size.

--update-cost trains bigtopics with learned priors for --seconds and reports the time the
updates took (the trainer's "priors" phase, which also builds the sweep's counts) against the
time per minibatch.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import peers
from systems import compile_kernels, read_peer_corpus

from bigtopics.cores import thread_count
from bigtopics.diagnostics import umass_coherence
from bigtopics.heldout import heldout_loglik
from bigtopics.settings import TrainSettings
from bigtopics.store import open_store
from bigtopics.trainer import Trainer

REUTERS = Path("/work/shared/corpora/reuters21578/docs.jsonl.gz")
SYSTEMS = ("bigtopics", "bigtopics-fixed", "bigtopics-learned", "tomotopy", "tomotopy-fixed")
LEARNED = {"optimize_alpha": True, "optimize_eta": True}
BIGTOPICS_OPTIONS = {"bigtopics": {}, "bigtopics-fixed": {"optimize_alpha": False}, "bigtopics-learned": LEARNED,
                     "bigtopics-alpha": {"optimize_alpha": True}}


def step_option(text: str) -> tuple[str, object]:
    """KEY=VALUE of --step, the value an int or a float where it reads as one."""
    key, _, value = text.partition("=")
    for number in (int, float):
        try:
            return key, number(value)
        except ValueError:
            pass
    return key, value


def train_bigtopics(train_store, work: Path, k: int, seconds: float, options: dict, seed: int, epochs: int = 0):
    """(topic rows p(w|k), the model's alpha, eta, seconds, minibatches, trainer, scale) after `seconds` of
    training, or after `epochs` epochs with their defaults if epochs > 0 (alpha_0 printed at steps
    2^i), and {scale_factor, scale_seconds}: the model's alpha is the learned alpha at the scale
    fitted on the documents the run keeps out, in the fit's time (not counted in the training time)."""
    settings = TrainSettings(n_topics=k, seed=seed, epochs=epochs or 1_000_000, **options)
    compile_kernels(train_store, settings)
    name = "-".join(f"{key}={value}" for key, value in options.items()) or "defaults"
    trainer = Trainer(train_store, work / f"run-{k}-{name}", settings, quiet=True)
    trainer.start(overwrite=True)
    start, epoch = time.perf_counter(), 0
    while (epoch < epochs) if epochs else (time.perf_counter() - start < seconds):
        for work_item in trainer.minibatches(epoch):
            trainer.step(work_item)
            if epochs and trainer.priors.alpha is not None and (trainer.state.step & (trainer.state.step - 1)) == 0:
                print(f"  step {trainer.state.step}: alpha_0 {trainer.priors.alpha.sum():.2f}", flush=True)
            if not epochs and time.perf_counter() - start >= seconds:
                break
        epoch += 1
    elapsed = time.perf_counter() - start
    table = trainer.table
    eta = trainer.priors.eta
    indptr, topics, values = table.to_csr()
    p = np.full((k, table.n_words), eta)
    p[topics, np.repeat(np.arange(table.n_words), np.diff(indptr))] += values
    p /= table.n_words * eta + table.topic_totals()[:, None]
    fit_start = time.perf_counter()
    alpha, scale = trainer.new_document_alpha()  # the model's alpha, as model.zarr holds it
    scale = {"scale_factor": scale and scale["factor"], "scale_seconds": round(time.perf_counter() - fit_start, 2)}
    trainer.executor.close()
    return p, alpha, eta, elapsed, trainer.state.step, trainer, scale


def train_tomotopy(train_store, k: int, seconds: float, optim_interval: int, seed: int):
    """(p(w|k), alpha, eta, seconds, sweeps): tp.LDAModel at its defaults, train(1) per sweep."""
    import tomotopy as tp

    indptr, words, counts, vocab = read_peer_corpus(peers.peer_corpus(train_store))
    vocab = np.asarray(vocab, dtype=object)
    model = tp.LDAModel(k=k, seed=seed)  # its defaults: alpha 0.1, eta 0.01
    model.optim_interval = optim_interval
    for a, b in zip(indptr[:-1], indptr[1:]):
        model.add_doc(np.repeat(vocab[words[a:b]], counts[a:b]).tolist())
    start, sweeps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        model.train(1, workers=0)
        sweeps += 1
    elapsed = time.perf_counter() - start
    word_id = {w: i for i, w in enumerate(vocab)}
    columns = np.array([word_id[w] for w in model.used_vocabs], np.int64)
    p = np.zeros((k, len(vocab)))
    for topic in range(k):
        p[topic, columns] = model.get_topic_word_dist(topic)
    return p / p.sum(axis=1, keepdims=True), np.asarray(model.alpha, np.float64), float(model.eta), elapsed, sweeps


def score(p, alpha, heldout, train_store, truth, seed: int) -> dict:
    source = peers.DenseTopics(p)
    out = {} if truth is None else {"cosine": peers.recovery(p, truth)}
    for method in ("left-to-right", "completion"):
        total, tokens = heldout_loglik(source, heldout, alpha=alpha, eta=peers.EVAL_ETA, seed=seed, method=method,
                                       particles=5, resample=False, n_workers=thread_count(0))
        out[method] = total / max(tokens, 1)
    coherence, _ = umass_coherence(open_store(train_store), peers.top_words(p, 10))
    out["coherence"] = float(coherence.mean())
    out["distinct_top10"] = peers.distinct_top_sets(p)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", "--topics", type=int, action="append", required=True)
    parser.add_argument("--seconds", type=float, default=60.0, help="training wall time per system")
    parser.add_argument("--epochs", type=int, default=0,
                        help="bigtopics: train this many epochs with their defaults instead of --seconds")
    parser.add_argument("--store", help="an existing store (default: ingest --corpus once into --cache)")
    parser.add_argument("--corpus", default=str(REUTERS))
    parser.add_argument("--section-tokens", type=int, default=0, help="cut documents into sections (books)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("--heldout-docs", type=int, default=1000)
    parser.add_argument("--train-docs", type=int, default=0,
                        help="train on a seeded sample of this many of the other documents (default: all)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--update-cost", action="store_true", help="measure the cost of the updates only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", help="append the results as JSON lines here")
    parser.add_argument("--step", type=step_option, action="append", default=[],
                        help="a local step option for bigtopics, KEY=VALUE (e.g. local_step=vb, sampler=alias)")
    args = parser.parse_args()
    if args.update_cost and args.epochs:
        parser.error("--update-cost measures --seconds of training, not --epochs")
    step = dict(args.step)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = Path(args.store) if args.store else peers.ensure_store(Path(args.corpus), cache, args.section_tokens)
    train_store, heldout_path = peers.prepare_split(store, args.heldout_docs, args.seed, cache, args.train_docs)
    heldout, _ = peers.load_heldout(heldout_path)
    truth = peers.true_topics(store, train_store)
    work = Path(tempfile.mkdtemp(prefix="priors-", dir=cache))
    for k in args.topics:
        if args.update_cost:
            *_, seconds, steps, trainer, _ = train_bigtopics(train_store, work, k, args.seconds, LEARNED, args.seed)
            phases = trainer.phase_seconds
            minibatch = sum(v for name, v in phases.items() if name != "priors") / steps
            print(f"K={k}: {steps} minibatches in {seconds:.1f} s, {minibatch * 1000:.0f} ms each without the "
                  f"updates; updates {phases.get('priors', 0) / steps * 1000:.1f} ms a minibatch "
                  f"({phases.get('priors', 0) / steps / minibatch:.2%})", flush=True)
            continue
        for name in args.systems.split(","):
            if name.startswith("bigtopics"):
                p, alpha, eta, seconds, steps, trainer, scale = train_bigtopics(train_store, work, k, args.seconds,
                                                                         BIGTOPICS_OPTIONS[name] | step, args.seed,
                                                                         args.epochs)
                unit, settled = "minibatches", {"batch_size": trainer.settings.batch_size,  # the defaults settle
                                                "scale_docs": trainer.settings.scale_docs, **scale}
            else:
                p, alpha, eta, seconds, steps = train_tomotopy(train_store, k, args.seconds,
                                                               0 if name.endswith("fixed") else 10, args.seed)
                unit, settled = "sweeps", {}
            result = {"system": name, **(step if name.startswith("bigtopics") else {}), **settled,
                      **({"epochs": args.epochs} if args.epochs and name.startswith("bigtopics") else {}), "k": k,
                      "seconds": round(seconds, 1), unit: steps,
                      "alpha_sum": float(np.sum(np.broadcast_to(alpha, (k,)))), "eta": eta,
                      **score(p, alpha, heldout, train_store, truth, args.seed),
                      "corpus": Path(args.store).name if args.store else Path(args.corpus).parent.name,
                      **({"train_docs": args.train_docs} if args.train_docs else {}), "machine": platform.node()}
            print(json.dumps(result), flush=True)
            if args.output:
                with open(args.output, "a") as f:
                    f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
