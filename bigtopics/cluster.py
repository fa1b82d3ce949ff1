"""The cluster layer: connecting to a Dask cluster, and mapping work over a store's parts on it.

Features above this layer (infer, held-out scoring, diagnostics) hand `map_parts` their own
callables: one that reads a part on a worker and gives back what it read with its distinct words,
one that gives the model's rows for those words (model.ModelRows), and one that computes the
part's result on the worker that read it. The training executor (executors/dask.py) connects
through here too. This module names no feature: it imports the worker thread count and nothing
else of bigtopics, and Dask only when a cluster is used (it is an optional dependency).

Failures: data the driver scatters has no task that could compute it again, so when the only
worker holding it dies, the scheduler forgets it and cancels the tasks waiting on it; a scatter
to a worker that died but is still listed fails (ScatterFailed). Both are tried again, up to
RETRIES times, while the client is connected.
"""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError
from contextlib import contextmanager
from typing import Callable, Iterator

from .options import OptionError
from .workers import use_threads

RETRIES = 3
# One kernel call at a time per worker process: numba's thread pool serves one caller at a time.
KERNELS = threading.Lock()


def connect(cluster: str | None = None, scheduler: str | None = None):
    """A dask.distributed Client: `cluster` "local:N" starts a LocalCluster of N single-threaded
    worker processes, `scheduler` joins a running cluster at that address."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("a cluster needs Dask: pip install 'bigtopics[distributed]'") from None
    if cluster is not None and scheduler is not None:
        raise OptionError("give --cluster or --scheduler, not both")
    if cluster is not None:
        kind, _, count = cluster.partition(":")
        if kind != "local" or not count.isdigit() or int(count) < 1:
            raise OptionError(f"--cluster {cluster!r}: give local:N (N worker processes)")
        local = LocalCluster(n_workers=int(count), threads_per_worker=1, processes=True, dashboard_address=None)
        try:
            return Client(local)
        except BaseException:  # (a Ctrl-C while connecting) the worker processes would outlive the command
            local.close()
            raise
    return Client(scheduler, timeout="10s")  # a running scheduler answers at once


@contextmanager
def connected(cluster: str | None = None, scheduler: str | None = None):
    """connect()'s Client for the length of a with-block (None without a cluster), then closed
    with the LocalCluster it started."""
    if cluster is None and scheduler is None:
        yield None
        return
    client = connect(cluster, scheduler)
    try:
        yield client
    finally:
        local = client.cluster if cluster is not None else None
        client.close()
        if local is not None:
            local.close()


def map_parts(client, parts: list[tuple], read: Callable, rows_for: Callable, compute: Callable, *args,
              in_flight: int | None = None) -> Iterator[tuple[int, object]]:
    """(index of the part, its result) for each part, in the order they finish: `read(*part)`
    runs on a worker and gives back (what it read, its distinct words); the driver sends
    `rows_for(words)` (the model's rows for those words), and `compute(what it read, rows,
    threads, *args)` runs on the worker that read it, with the worker's threads. The documents
    stay on the workers and no part is sent the whole model. Parts are independent, so up to
    `in_flight` (two per worker) run at once. A part whose rows were lost with a worker is sent
    its rows again, up to RETRIES times."""
    from distributed import as_completed

    in_flight = in_flight or 2 * max(len(client.scheduler_info().get("workers", {})), 1)
    todo = iter(enumerate(parts))
    # future of a part's words -> (index, future of the part); future of its result -> (index,
    # future of the part, its words, attempts so far)
    reading, computing = {}, {}
    pending = as_completed()

    def submit_next() -> None:
        index, part = next(todo, (None, None))
        if part is not None:
            data = client.submit(_read_on_worker, read, part, pure=False, retries=RETRIES)
            words = client.submit(_second, data, pure=False, retries=RETRIES)
            reading[words] = (index, data)
            pending.add(words)

    def compute_part(index, data, words, attempt=0) -> None:
        rows = scatter_until_sent(client, rows_for(words))
        done = client.submit(_compute_on_worker, compute, data, rows, args, pure=False, retries=RETRIES)
        computing[done] = (index, data, words, attempt)
        pending.add(done)

    for _ in range(in_flight):
        submit_next()
    for future in pending:
        if future in reading:  # a part's words: send the model's rows for them
            index, data = reading.pop(future)
            compute_part(index, data, future.result())
            continue
        index, data, words, attempt = computing.pop(future)
        try:
            result = future.result()
        except CancelledError:
            if not may_try_again(client, attempt):
                raise
            compute_part(index, data, words, attempt + 1)
            continue
        yield index, result
        submit_next()


# -- on the workers ------------------------------------------------------------------------------
def _read_on_worker(read: Callable, part: tuple):
    """read(*part), outside the worker's thread pool (secede), so that reading overlaps the
    computing of the part before, as the in-process engines read ahead in a thread of their own."""
    from distributed import secede

    secede()
    return read(*part)


def _second(pair: tuple):
    return pair[1]


def _compute_on_worker(compute: Callable, data: tuple, rows, args: tuple):
    from distributed import get_worker

    with KERNELS:
        return compute(data[0], rows, use_threads(get_worker().state.nthreads), *args)


# -- sending data that has no task behind it -----------------------------------------------------
def scatter_until_sent(client, data):
    """client.scatter(data), tried again when it fails: a worker that died is listed by the
    scheduler until it notices, and a scatter to it fails once the connection times out."""
    for attempt in range(RETRIES + 1):
        try:
            return scattered(client.scatter, data, direct=True, hash=False)
        except ScatterFailed:
            if not may_try_again(client, attempt):
                raise


class ScatterFailed(OSError):
    """Data the driver scattered did not reach the workers: one it was sent to had died (an
    OSError, so the CLI reports it in one line when the attempts run out)."""


def scattered(send, *args, **options):
    """send(*args, **options) (a scatter, or waiting on one), raised as ScatterFailed when a
    worker it was sent to died: an OSError (the dead worker's connection timing out), or the
    scheduler's KeyError for a worker it removed after the data reached it and before the
    scatter told it where the data is (Scheduler.update_data, and replicate for a broadcast,
    look each worker up)."""
    try:
        return send(*args, **options)
    except OSError as error:
        raise ScatterFailed(f"a scatter to the workers failed: {error}") from error
    except KeyError as error:
        raise ScatterFailed(f"a scatter to the workers failed: worker {error} left the cluster") from error


def may_try_again(client, attempt: int) -> bool:
    """Whether what was lost with a worker may be tried again: fewer than RETRIES attempts after
    the first, and the client still connected (a closed client's futures are all cancelled)."""
    return attempt < RETRIES and client.status == "running"
