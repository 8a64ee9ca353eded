"""Admin clients are destroyed on a drkit thread - never by the cyclic collector elsewhere.

librdkafka aborts the whole process ("rd_kafka_destroy() called from librdkafka owned thread")
when a client handle is destroyed on one of its own threads, and librdkafka's background
thread runs Python code: the admin API completes its futures there.  Python frees an object
caught in a reference cycle in whichever thread its cyclic collector happens to run - so an
admin client left in a cycle (an error retried through tenacity keeps the frames that hold it;
so did an error callback bound to its owner) could be freed on that background thread, taking
the process down.  A monitor starved of CPU died this way (confluent-kafka-python knows the
hazard: its own tests close admin clients explicitly).

So an owner either closes its admin client (``close()``: destroyed now, on the caller's
thread), or, when the owner is dropped, the client goes to the *reaper*, one daemon thread
per process that destroys it.  The reaper holds the client from the owner's finalizer, so the
client itself is never part of the garbage the collector frees.
"""

from __future__ import annotations

import logging
import queue
import threading
import weakref

from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

# The threads of blocking calls that may still run on one client (drkit.kafka.interruptible).
Calls = set[threading.Thread]


class _Reaper:
    """Destroys dropped clients on a thread of its own (started with the first client)."""

    def __init__(self) -> None:
        # SimpleQueue.put may be called from a finalizer on any thread, even mid-collection.
        self._dropped: queue.SimpleQueue[tuple[AdminClient, Calls]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def ensure_started(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="drkit-client-reaper", daemon=True
                )
                self._thread.start()

    def take(self, client: AdminClient, calls: Calls) -> None:
        self._dropped.put((client, calls))

    def _run(self) -> None:
        while True:
            client, calls = self._dropped.get()
            for call in list(calls):  # a call an interrupted caller left running: let it end
                call.join()
            destroy(client)
            del client, calls  # the last references go here, not at the next arrival


_REAPER = _Reaper()


def close_when_idle(client: AdminClient, calls: Calls) -> None:
    """Destroy ``client`` now, or - while a blocking call is still running on it (its caller
    was interrupted) - on the reaper's thread once that call ended: destroying a handle under a
    call in C is a use-after-free."""
    if any(call.is_alive() for call in calls):
        _REAPER.ensure_started()
        _REAPER.take(client, calls)
    else:
        destroy(client)


def destroy(client: AdminClient) -> None:
    """Destroy ``client``'s handle now, on this thread (idempotent)."""
    try:
        client.__exit__(None, None, None)
    except RuntimeError:
        pass  # already closed
    except Exception as err:  # a failing destroy must not kill the reaper
        log.warning("closing an admin client failed", extra={"error": str(err)})


def owned_by(
    owner: object, client: AdminClient, calls: Calls
) -> weakref.finalize[[AdminClient, Calls], object]:
    """Hand ``client`` to the reaper when ``owner`` is freed; the returned finalizer's
    ``detach()`` takes it back (for an owner that closes it itself).  ``calls``: the threads of
    blocking calls still running on the client (drkit.kafka.interruptible), owned by
    ``owner``; the reaper waits for them before it destroys the client."""
    _REAPER.ensure_started()
    finalizer = weakref.finalize(owner, _REAPER.take, client, calls)
    finalizer.atexit = False  # at exit the process ends anyway; nothing is left to reap
    return finalizer
