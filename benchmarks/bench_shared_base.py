"""Quality per second where topics share their frequent words (issue 26): bigtopics against
tomotopy's collapsed Gibbs sampler, in one run, on a synthetic corpus whose true topics are
Dirichlet draws around one Zipfian base measure (tools/synth_corpus.py --base zipf).

    python benchmarks/bench_shared_base.py                          # 50k documents, K = 100, 60 s each
    python benchmarks/bench_shared_base.py -k 200 --seconds 120 --docs 200000
    python benchmarks/bench_shared_base.py --systems bigtopics -o kappa=0.7 -o batch_size=2048

Each system trains for --seconds of training time on all cores, one after the other; at the
marks (fractions of --seconds) training is paused and, outside the timing, its topics p(w | k)
are scored on the held-out documents by one evaluator (benchmarks/peers.py: left-to-right, 5
particles, the same alpha): the score per token, its difference from the one-topic unigram model
(the training corpus' word frequencies) and from the true topics; the mean over the true topics
of the best-match cosine (peers.recovery); and the number of distinct top-10
word sets among the K topics (topics collapsing onto the corpus' frequent words lose distinct
sets). `-o name=value` passes training settings to bigtopics (TrainSettings or the local step's
options), for controlled experiments; the table ends with bigtopics / tomotopy at each mark.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import (
    EVAL_ETA,
    DenseTopics,
    distinct_top_sets,
    load_heldout,
    peer_corpus,
    prepare_split,
    recovery,
    true_topics,
)
from systems import BigtopicsSystem, TomotopySystem

from bigtopics.heldout import heldout_loglik
from bigtopics.settings import ALPHA_SUM
from bigtopics.store import open_store
from bigtopics.synth import CorpusSpec, write_corpus

MARKS = (1 / 6, 1 / 3, 2 / 3, 1)
PARTICLES = 5


def corpus(args, cache: Path) -> Path:
    """The synthetic store (drawn once into the cache, with its truth beside it)."""
    spec = CorpusSpec(n_docs=args.docs, n_topics=args.true_topics or args.topics, n_words=args.vocab,
                      mean_length=args.mean_length, alpha=args.true_alpha, eta=args.true_eta, seed=args.seed,
                      base="zipf", zipf_exponent=args.zipf_exponent)
    name = (f"shared-base-d{spec.n_docs}-k{spec.n_topics}-v{spec.n_words}-l{spec.mean_length:g}"
            f"-a{spec.alpha:g}-e{spec.eta:g}-z{spec.zipf_exponent:g}-s{spec.seed}.zarr")
    store = cache / name
    if not store.exists():
        print(f"drawing {store} (once)", flush=True)
        write_corpus(spec, store, overwrite=True)
    return store


class Evaluator:
    def __init__(self, heldout, truth: np.ndarray | None, alpha: float, seed: int):
        self.heldout, self.truth, self.alpha, self.seed = heldout, truth, alpha, seed

    def loglik(self, p: np.ndarray) -> float:
        total, tokens = heldout_loglik(DenseTopics(p), self.heldout, alpha=self.alpha, eta=EVAL_ETA, seed=self.seed,
                                       particles=PARTICLES, resample=False, n_workers=os.cpu_count() or 1)
        return total / max(tokens, 1)

    def __call__(self, p: np.ndarray) -> dict:
        return {"heldout": self.loglik(p), "cosine": np.nan if self.truth is None else recovery(p, self.truth),
                "distinct_top10": distinct_top_sets(p)}


def dense(system) -> np.ndarray:
    return np.concatenate([rows for _, rows in system.topic_rows()])


def run_system(name: str, system, advance, marks, evaluate, passes_done, by_passes: bool) -> list[dict]:
    """Train by `advance()` (one minibatch or one sweep) until each mark, then score. A mark is
    seconds of training time, or (by_passes) passes over the training documents."""
    curve, seconds, units = [], 0.0, 0
    for mark in marks:
        while (passes_done() if by_passes else seconds) < mark:
            start = time.perf_counter()
            advance()
            seconds += time.perf_counter() - start
            units += 1
        point = {"system": name, "mark": mark, "seconds": round(seconds, 2), "units": units,
                 "passes": round(passes_done(), 3), **evaluate(dense(system))}
        print(f"  {name} {seconds:7.1f}s  {point['passes']:6.2f} passes  {point['heldout']:.4f}/token  "
              f"cos {point['cosine']:.3f}  distinct {point['distinct_top10']}", flush=True)
        curve.append(point)
    return curve


def parse_options(pairs) -> dict:
    options = {}
    for pair in pairs or ():
        key, _, value = pair.partition("=")
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                pass
        options[key.replace("-", "_")] = {"true": True, "false": False}.get(value, value)
    return options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", help="an existing store instead of the synthetic corpus (no true topics)")
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("-k", "--topics", type=int, default=100, help="topics trained (and true ones, by default)")
    parser.add_argument("--true-topics", type=int, default=0, help="true topics, if not --topics")
    parser.add_argument("--vocab", type=int, default=20_000)
    parser.add_argument("--mean-length", type=float, default=150.0)
    parser.add_argument("--true-alpha", type=float, default=0.1, help="the generator's document-topic prior")
    parser.add_argument("--true-eta", type=float, default=0.01, help="the generator's eta (concentration V eta)")
    parser.add_argument("--zipf-exponent", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--heldout", type=int, default=1000, help="documents held out and scored")
    parser.add_argument("--seconds", type=float, default=60.0, help="training time per system")
    parser.add_argument("--passes", type=float, default=0.0,
                        help="mark by passes over the training documents (bigtopics: documents visited / D; "
                             "tomotopy: sweeps) instead of seconds: quality per pass, which a loaded machine "
                             "does not change")
    parser.add_argument("--systems", default="bigtopics,tomotopy")
    parser.add_argument("--tomotopy-eta", type=float, help="tomotopy's eta (default: its own, 0.01)")
    parser.add_argument("-o", "--option", action="append", help="bigtopics setting name=value (repeatable)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "bigtopics-bench"))
    parser.add_argument("--json", help="write every point here")
    args = parser.parse_args()

    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    store = Path(args.store) if args.store else corpus(args, cache)
    train_store, heldout_path = prepare_split(store, args.heldout, args.seed, cache)
    heldout, unseen = load_heldout(heldout_path)
    train = open_store(train_store)
    alpha = ALPHA_SUM / args.topics  # bigtopics' default, given to both
    truth_p = true_topics(store, train_store)
    evaluate = Evaluator(heldout, truth_p, alpha, args.seed)
    frequencies = (train.term_counts / train.term_counts.sum())[None, :]
    unigram = evaluate.loglik(frequencies)
    truth = evaluate(truth_p) if truth_p is not None else {"heldout": np.nan, "distinct_top10": "-"}
    print(f"{train.n_docs:,} training documents, {int(train.term_counts.sum()):,} tokens, V = {train.n_words:,}, "
          f"K = {args.topics}, alpha = {alpha:g}; held-out {heldout.n_docs} documents ({unseen} unseen tokens "
          f"dropped): unigram {unigram:.4f}/token (cosine {evaluate(frequencies)['cosine']:.3f}), true topics "
          f"{truth['heldout']:.4f}/token ({truth['distinct_top10']} distinct top-10 sets)", flush=True)
    truth = truth["heldout"]
    marks = [round((args.passes or args.seconds) * f, 2) for f in MARKS]
    options = parse_options(args.option)
    curves = {}
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        for name in args.systems.split(","):
            if name == "bigtopics":
                system = BigtopicsSystem(train_store, None, Path(tmp), args.topics, alpha, args.seed, None, 0, options)
                batches = (w for e in itertools.count() for w in system.trainer.minibatches(e))

                def advance(s=system, b=batches):
                    return s.trainer.step(next(b))

                def passes(s=system):
                    return s.trainer.state.docs_seen / train.n_docs

                print(f"bigtopics {json.dumps({k: v for k, v in system.settings.items() if k != 'warmup_s'})}")
            elif name == "tomotopy":
                system = TomotopySystem(train_store, peer_corpus(train_store), None, args.topics, alpha, args.seed,
                                        None, 0, {"eta": args.tomotopy_eta} if args.tomotopy_eta else {})
                advance = system.train_pass

                def passes(s=system):
                    return s.model.global_step
            else:
                raise SystemExit(f"unknown system {name!r}: bigtopics or tomotopy")
            curves[name] = run_system(name, system, advance, marks, evaluate, passes, bool(args.passes))
            del system

    print(f"\n{'system':10} {'seconds':>8} {'passes':>7} {'held-out':>9} {'- unigram':>9} {'- truth':>8} "
          f"{'cosine':>7} {'distinct':>8}")
    for name, curve in curves.items():
        for p in curve:
            print(f"{name:10} {p['seconds']:8.1f} {p['passes']:7.2f} {p['heldout']:9.4f} {p['heldout'] - unigram:9.4f} "
                  f"{p['heldout'] - truth:8.4f} {p['cosine']:7.3f} {p['distinct_top10']:8d}")
    if "bigtopics" in curves and "tomotopy" in curves:
        print("\nbigtopics vs tomotopy at each mark: held-out difference (nats/token), cosine ratio, distinct ratio")
        for b, t in zip(curves["bigtopics"], curves["tomotopy"]):
            print(f"  {b['mark']:6.1f}s  {b['heldout'] - t['heldout']:+.4f}  {b['cosine'] / t['cosine']:.3f}  "
                  f"{b['distinct_top10'] / t['distinct_top10']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "args": vars(args), "machine": platform.node(), "cpus": os.cpu_count(), "unigram": unigram,
            "truth": truth, "curves": curves}, indent=1) + "\n")


if __name__ == "__main__":
    main()
