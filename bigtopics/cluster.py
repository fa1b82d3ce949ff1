"""The cluster layer: connecting to a Dask cluster, and mapping work over a store's parts on it.

Features above this layer (infer, held-out scoring, diagnostics) hand `map_parts` their own
callables: one that reads a part on a worker and gives back what it read with its distinct words,
one that gives the model's rows for those words (model.ModelRows), and one that computes the
part's result on the worker that read it. The training executor (executors/dask.py) connects
through here too. This module names no feature: it imports the worker thread count and nothing
else of bigtopics, and Dask only when a cluster is used (it is an optional dependency).

Failures: data the driver scatters has no task that could compute it again, so when the only
worker holding it dies, the scheduler forgets it and cancels the tasks waiting on it; a scatter
to a worker that died but is still listed fails (ScatterFailed); a worker that dies while the
scheduler broadcasts to it closes the driver's connection to the scheduler. Whatever the driver
asks of the cluster goes through `retried`: what a lost worker, or a scheduler that drops the
connection and takes it up again, made fail is tried again (RETRIES times); only a scheduler
that stops answering (`may_try_again` tells which) ends the work, as ClusterLost.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import CancelledError
from contextlib import contextmanager, suppress
from typing import Callable, Iterator

from .cores import use_threads
from .options import OptionError

RETRIES = 3
SCHEDULER_PATIENCE = 60.0  # seconds a scheduler may take to answer again (Dask's client reconnects for 10-30 s)
# One kernel call at a time per worker process: each runs on all the worker's threads (kernels/pieces.py),
# so a second at once would only share the cores and hold both calls' memory.
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
        # the dashboard on a free port (the distributed extra installs bokeh for it): Executor.where says which
        # its workers' logs muted: what goes wrong on them reaches the driver as a task's error or a
        # lost worker, said in one line; shutting the cluster down races their heartbeats otherwise
        local = LocalCluster(n_workers=int(count), threads_per_worker=1, processes=True, dashboard_address=":0",
                             silence_logs=logging.CRITICAL)
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
    its rows again, and one whose futures the client dropped (it connected to its scheduler
    again) is read again, up to RETRIES times (may_try_again)."""
    from distributed import as_completed

    in_flight = in_flight or 2 * max(len(client.scheduler_info().get("workers", {})), 1)
    todo = iter(enumerate(parts))
    # future of a part's words -> (index, part, future of what it read, attempts so far); future of
    # its result -> (index, part, future of what it read, its words, attempts so far)
    reading, computing = {}, {}
    pending = as_completed()

    def read_part(index, part, attempt=0) -> None:
        data = client.submit(_read_on_worker, read, part, pure=False, retries=RETRIES)
        words = client.submit(_second, data, pure=False, retries=RETRIES)
        reading[words] = (index, part, data, attempt)
        pending.add(words)

    def submit_next() -> None:
        index, part = next(todo, (None, None))
        if part is not None:
            read_part(index, part)

    def compute_part(index, part, data, words, attempt) -> None:
        rows = scatter_until_sent(client, rows_for(words))
        done = client.submit(_compute_on_worker, compute, data, rows, args, pure=False, retries=RETRIES)
        computing[done] = (index, part, data, words, attempt)
        pending.add(done)

    for _ in range(in_flight):
        submit_next()
    for future in pending:
        read_it = future in reading
        index, part, data, *words, attempt = reading.pop(future) if read_it else computing.pop(future)
        try:
            result = future.result()
        except CancelledError as error:  # the part's rows lost with a worker, or the client connected again
            if not may_try_again(client, error, attempt):
                raise
            if read_it or data.cancelled():  # (the client dropped every future it held)
                read_part(index, part, attempt + 1)
            else:
                compute_part(index, part, data, words[0], attempt + 1)
            continue
        if read_it:  # a part's words: send the model's rows for them
            compute_part(index, part, data, result, attempt)
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
def gathered(client, futures: list, watch: Callable[[], None], every: float) -> list:
    """client.gather(futures), calling `watch` every `every` seconds while they are not done (it
    raises to stop waiting: a worker that will never run them). A failed or cancelled future
    ends the wait at once, and gather raises its error."""
    from distributed import wait

    while True:
        try:
            wait(futures, timeout=every)
            break
        except TimeoutError:
            watch()
        except Exception:  # (a failed or cancelled future) gather raises what retried() expects
            break
    return client.gather(futures)


def scatter_until_sent(client, data):
    """client.scatter(data), tried again when it fails: a worker that died is listed by the
    scheduler until it notices, and a scatter to it fails once the connection times out."""
    return retried(client, lambda: scattered(client.scatter, data, direct=True, hash=False))


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


class ClusterLost(OSError):
    """The run cannot go on on its cluster: the scheduler stopped answering, or workers were lost
    under every attempt of one call. An OSError, so the CLI reports it in one line; `hint` (the
    trainer's resume command) is appended to it."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f"; {self.hint}" if self.hint else "")

    def __reduce__(self):
        return type(self), (self.message, self.hint)


def _connection_failed(error: BaseException) -> bool:
    """Whether `error` is how distributed reports a connection (to a worker or the scheduler) that
    broke or could not be made, or work it dropped with one: a closed comm (CommClosedError, also
    what the scheduler's reply turns into when its broadcast to a dead worker fails), a refused
    or reset connection, a timeout, the bare OSError of a connect that timed out, a scatter that
    missed, futures cancelled, a client that gave up on its scheduler and closed. Not bigtopics'
    own errors, nor a file's (subclasses of OSError)."""
    from distributed.client import ClosedClientError
    from distributed.comm import CommClosedError

    return (isinstance(error, (CommClosedError, ConnectionError, TimeoutError, ScatterFailed, CancelledError,
                               ClosedClientError))
            or type(error) is OSError)


def _scheduler_answers(client, patience: float = SCHEDULER_PATIENCE) -> bool:
    """Whether the client's scheduler answers, given the time Dask's client takes to connect again
    (it tries for its timeout, then closes) and `patience` seconds at most."""
    deadline = time.monotonic() + patience
    while client.status in ("running", "connecting", "newly-created") and time.monotonic() < deadline:
        if client.status == "running":
            with suppress(OSError):  # (a TimeoutError too)
                client.sync(client.scheduler.identity, callback_timeout=max(deadline - time.monotonic(), 1.0))
                return True
        time.sleep(0.2)
    return False


def may_try_again(client, error: BaseException, attempt: int) -> bool:
    """Whether a call to the cluster that failed with `error` at its `attempt`-th try (from 0)
    may be made again: a worker was lost under it (or the scheduler dropped the connection and
    answers again). False for any other error (a task's own). A ClusterLost, raised from
    `error`, when the scheduler no longer answers or the call has had RETRIES tries again."""
    if not _connection_failed(error):
        return False
    scheduler = f" {client.scheduler.address}" if client.scheduler is not None else ""  # (closing forgets it)
    if not _scheduler_answers(client):
        raise ClusterLost(f"lost the Dask cluster: its scheduler{scheduler} stopped answering") from error
    if attempt >= RETRIES:
        raise ClusterLost(f"the cluster lost workers under {RETRIES + 1} tries in a row ({_first_line(error)})") \
            from error
    return True


def retried(client, call, before_again=None):
    """call(), made again (after before_again() if given) while may_try_again says so."""
    for attempt in range(RETRIES + 1):
        try:
            return call()
        except Exception as error:
            if not may_try_again(client, error, attempt):
                raise
            if before_again is not None:
                before_again()


def _first_line(error: BaseException) -> str:
    """What distributed says of an error, in one line (a cancellation's message runs to several)."""
    return next(iter(str(error).splitlines()), "") or type(error).__name__
