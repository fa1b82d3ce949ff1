"""The learned alpha's scale for new documents (bigtopics/alpha_scale.py): the factor fitted on
documents kept out of training, against the exact evidence (tests/naive.py) and on documents
drawn with a known prior; the documents a run keeps out for it."""

import naive
import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from test_evaluate import batch_of, dense_model

from bigtopics.alpha_scale import COARSE_STEPS, fit_alpha_scale, scale_documents
from bigtopics.cli import main
from bigtopics.options import MAX_PRIOR, MIN_PRIOR, OptionError
from bigtopics.settings import TrainSettings, recorded_settings, scale_doc_count

ETA = 0.05
N = np.array([[40.0, 25.0, 0.0, 0.0, 3.0],
              [0.0, 5.0, 30.0, 12.0, 0.0],
              [2.0, 0.0, 0.0, 20.0, 35.0]])
SHAPE = np.array([0.5, 0.3, 0.2])


def lda_documents(phi, alpha, n_docs, length, seed):
    """Documents drawn from LDA with topics phi and prior alpha, as lists of word ids."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        theta = rng.dirichlet(alpha)
        topics = rng.choice(len(alpha), size=length, p=theta)
        docs.append([int(rng.choice(phi.shape[1], p=phi[k])) for k in topics])
    return docs


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return dense_model(tmp_path_factory.mktemp("scale") / "model.zarr", N, alpha=SHAPE, eta=ETA)


def test_the_factor_is_the_best_scoring_one_by_the_exact_evidence(model):
    """With many particles the factor chosen must score, by the exact evidence summed over the
    documents, within 0.1% of the best of the factors the fit tried."""
    phi = naive.point_estimates(N, ETA)
    docs = lda_documents(phi, 2.0 * SHAPE, 30, 4, seed=1)
    factor, scores = fit_alpha_scale(model, batch_of(docs), SHAPE, ETA, seed=3, particles=2000)
    assert {2.0 ** (j / 2) for j in COARSE_STEPS} <= set(scores) and factor in scores
    exact = {f: sum(naive.log_evidence(d, f * SHAPE, phi) for d in docs) for f in scores}
    assert exact[factor] >= max(exact.values()) - 1e-3 * abs(max(exact.values())), (factor, exact)


@pytest.mark.parametrize("truth", [0.25, 4.0, 32.0])
def test_documents_drawn_with_a_scaled_prior_give_back_its_scale(model, truth):
    """Drawn with `truth` times the given alpha, 600 documents of 25 tokens give back a factor
    within a factor 1.5 of it, also beyond the first factors tried (1/8 to 8)."""
    phi = naive.point_estimates(N, ETA)
    docs = lda_documents(phi, truth * SHAPE, 600, 25, seed=int(truth * 8))
    factor, _ = fit_alpha_scale(model, batch_of(docs), SHAPE, ETA, seed=0)
    assert truth / 1.5 < factor < truth * 1.5, factor


def test_scale_documents_are_a_fixed_sample_apart_from_the_held_out_ones():
    heldout = np.arange(0, 100_000, 7)
    docs = scale_documents(100_000, 500, 3, heldout)
    assert len(docs) == 500 and len(np.unique(docs)) == 500 and np.all(np.diff(docs) > 0)
    assert not np.isin(docs, heldout).any()
    assert np.array_equal(docs, scale_documents(100_000, 500, 3, heldout))
    assert not np.array_equal(docs, scale_documents(100_000, 500, 4, heldout))
    assert len(scale_documents(100_000, 0, 3, heldout)) == 0


def test_the_default_count_and_its_options():
    assert [scale_doc_count(n) for n in (999, 1000, 5_000, 100_000, 10**9)] == [0, 20, 50, 1000, 1000]
    learned = TrainSettings(n_topics=10)
    learned.settle_scale_docs(5_000)
    assert learned.scale_docs == 50
    fixed = TrainSettings(n_topics=10, optimize_alpha=False)
    fixed.settle_scale_docs(5_000)
    assert fixed.scale_docs == 0
    with pytest.raises(OptionError, match="--scale-docs applies to a learned alpha"):
        TrainSettings(n_topics=10, optimize_alpha=False, scale_docs=5).validate()
    with pytest.raises(OptionError, match="--scale-docs"):
        TrainSettings(n_topics=10, scale_docs=-1).validate()
    record = {"settings": {"n_topics": 10, "optimize_alpha": True, "step_options": {}}}
    assert recorded_settings(record, "settings.json").scale_docs == 0  # a run started before keeps its alpha as learned


@pytest.mark.slow
def test_a_run_keeps_its_scale_documents_out_and_writes_the_scaled_alpha(demo_store, tmp_path):
    """From the CLI: the model's alpha is the checkpointed learned alpha times the factor that
    scored best on the kept-out documents, which no minibatch holds; --scale-docs 0 writes the
    learned alpha itself."""
    from bigtopics.checkpoints import load_latest_checkpoint
    from bigtopics.trainer import Trainer

    args = ["-k", "8", "--seed", "2", "--epochs", "2", "--max-docs", "1600", "--checkpoint-every", "1000",
            "--heldout", "30", "--optimize-burn-in", "2", "--quiet"]
    runner = CliRunner()
    result = runner.invoke(main, ["train", str(demo_store), "-o", str(tmp_path / "a"), *args, "--scale-docs", "40"])
    assert result.exit_code == 0, result.output
    attrs = dict(zarr.open_group(tmp_path / "a" / "model.zarr", mode="r").attrs)
    scale = attrs["alpha_scale"]
    tried = dict(scale["loglik_per_token"])
    assert scale["documents"] == 40 and scale["factor"] == max(tried, key=tried.get) and len(tried) >= 9
    _, arrays, _ = load_latest_checkpoint(tmp_path / "a")
    learned = arrays["prior_alpha"]
    assert np.allclose(attrs["alpha"], np.clip(scale["factor"] * learned, MIN_PRIOR, MAX_PRIOR), rtol=1e-12)
    assert attrs["settings"]["scale_docs"] == 40

    settings = TrainSettings(n_topics=8, seed=2, epochs=2, heldout=30, scale_docs=40)
    trainer = Trainer(demo_store, tmp_path / "c", settings, quiet=True)
    kept = trainer.scale_doc_numbers
    assert len(kept) == 40 and not np.isin(kept, trainer.heldout_docs).any()
    for epoch in range(2):
        for batch in trainer.plan.epoch(epoch):
            assert not np.isin(batch.doc_numbers, kept).any()
    trainer.executor.close()

    result = runner.invoke(main, ["train", str(demo_store), "-o", str(tmp_path / "d"), *args, "--scale-docs", "2000"])
    assert result.exit_code != 0 and "none would be left to train on" in result.output

    result = runner.invoke(main, ["train", str(demo_store), "-o", str(tmp_path / "b"), *args, "--scale-docs", "0"])
    assert result.exit_code == 0, result.output
    attrs = dict(zarr.open_group(tmp_path / "b" / "model.zarr", mode="r").attrs)
    assert "alpha_scale" not in attrs
    assert np.array_equal(attrs["alpha"], load_latest_checkpoint(tmp_path / "b")[1]["prior_alpha"])


@pytest.mark.slow
def test_snapshots_carry_the_learned_alpha_and_the_end_of_a_run_scales_it(demo_store, tmp_path):
    """A snapshot written as training goes holds the learned alpha itself, and so does a stopped
    run's model; reaching the end writes the model again with the fitted factor, though its
    progress is the snapshot's."""
    from bigtopics.trainer import Trainer

    settings = TrainSettings(n_topics=6, seed=1, epochs=2, optimize_burn_in=2, scale_docs=30)
    trainer = Trainer(demo_store, tmp_path / "run", settings, quiet=True)
    trainer.start(overwrite=True)
    minibatches = trainer.minibatches(0)
    for work in minibatches:
        trainer.step(work)
        if trainer.state.step == 4:
            break
    minibatches.close()
    trainer.write_model()
    attrs = dict(zarr.open_group(tmp_path / "run" / "model.zarr", mode="r").attrs)
    assert "alpha_scale" not in attrs and attrs["alpha"] == trainer.priors.alpha.tolist()
    trainer.finish(reached_the_end=False)
    assert "alpha_scale" not in dict(zarr.open_group(tmp_path / "run" / "model.zarr", mode="r").attrs)
    trainer.finish()
    attrs = dict(zarr.open_group(tmp_path / "run" / "model.zarr", mode="r").attrs)
    factor = attrs["alpha_scale"]["factor"]
    assert attrs["alpha_scale"]["documents"] == 30
    assert np.allclose(attrs["alpha"], np.clip(factor * trainer.priors.alpha, MIN_PRIOR, MAX_PRIOR), rtol=1e-12)
    trainer.executor.close()
