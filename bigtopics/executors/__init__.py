"""Executors, by name: a new one is a module with an Executor class and a line here."""

from .base import Executor, StepTask
from .cluster import ClusterLost, DaskExecutor
from .threads import LocalThreads

EXECUTORS: dict[str, type[Executor]] = {"threads": LocalThreads, "dask": DaskExecutor}


def make_executor(store, *, workers: int = 0, window_blocks: int = 16, cluster: str | None = None,
                  scheduler: str | None = None) -> Executor:
    """This process's threads, or a Dask cluster: `cluster` "local:N" starts N worker processes,
    `scheduler` joins a running cluster at its address (cluster.connect)."""
    if cluster is None and scheduler is None:
        return LocalThreads(store, workers, window_blocks)
    from .cluster import connect

    return DaskExecutor(connect(cluster, scheduler), store, window_blocks, owns_client=True)


__all__ = ["EXECUTORS", "ClusterLost", "DaskExecutor", "Executor", "LocalThreads", "StepTask", "make_executor"]
