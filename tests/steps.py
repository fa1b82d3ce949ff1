"""Running a local step by its options in tests, as the trainer does (local_steps/)."""

from bigtopics.local_steps import LOCAL_STEPS


def run_step(name, batch, frozen, doc_seeds, *, alpha, n_workers=1, epochs=1, previous_topics=None, **options):
    """The named step with `options` on the batch (its chains continued from previous_topics, if
    given): its StepResult."""
    step = LOCAL_STEPS[name](**options).resolved(epochs)
    step.validate(frozen.n_topics)
    extra = {} if previous_topics is None else {"previous_topics": previous_topics}
    return step.run(batch, frozen, doc_seeds, alpha=alpha, n_workers=n_workers, **extra)


def gibbs_local_step(batch, frozen, doc_seeds, *, alpha, n_workers=1, **options):
    """Nhat of the gibbs step (SparseStats)."""
    return run_step("gibbs", batch, frozen, doc_seeds, alpha=alpha, n_workers=n_workers, **options).stats()
