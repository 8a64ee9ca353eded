"""The collector pause nests across threads and restores what it found."""

from __future__ import annotations

import gc
import threading

from drkit.gc_pause import collection_paused


def test_the_collector_comes_back_on_only_when_the_last_of_overlapping_pauses_ends() -> None:
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collection_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with collection_paused():
        thread.start()
        assert inside.wait(10)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pause still runs
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_pause_inside_a_disabled_collector_leaves_it_disabled() -> None:
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_in_the_block_still_ends_the_pause() -> None:
    try:
        with collection_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()
