"""The daemon's serving thread (ctrlz.session.daemon.serial): jobs from other threads run there, in
order, one at a time; when the daemon stops, the jobs still waiting are refused, untouched."""

from __future__ import annotations

import threading

import pytest

from ctrlz.session.daemon.serial import DaemonStopping, Serial


def serve_until(serial: Serial, done: threading.Event) -> None:
    while not done.is_set():
        work = serial.next_job(timeout=0.05)
        if work is not None:
            work()


def test_jobs_from_other_threads_run_on_the_serving_thread_in_order() -> None:
    serial = Serial()
    ran: list[tuple[int, str]] = []
    results: dict[int, int] = {}

    def ask(i: int) -> None:
        results[i] = serial.run(lambda: ran.append((i, threading.current_thread().name))
                                or i * 10)

    done = threading.Event()
    askers = [threading.Thread(target=ask, args=(i,)) for i in range(5)]
    for t in askers:
        t.start()
        t.join(timeout=0.01)  # usually in order; the assertion below holds either way
    server = threading.Thread(target=serve_until, args=(serial, done))
    # the serving thread is the one that made the Serial: hand it over for this test
    serial.owner = server
    server.start()
    for t in askers:
        t.join(timeout=30)
    done.set()
    server.join(timeout=30)
    assert results == {i: i * 10 for i in range(5)}
    assert {name for _, name in ran} == {server.name}
    assert sorted(i for i, _ in ran) == list(range(5))


def test_a_job_that_raises_raises_where_it_was_asked() -> None:
    serial = Serial()
    done = threading.Event()
    server = threading.Thread(target=serve_until, args=(serial, done))
    serial.owner = server
    server.start()
    try:
        with pytest.raises(ZeroDivisionError):
            serial.run(lambda: 1 / 0)
        assert serial.run(lambda: "still serving") == "still serving"
    finally:
        done.set()
        server.join(timeout=30)


def test_on_the_serving_thread_itself_a_job_just_runs() -> None:
    serial = Serial()  # made here: this thread serves it
    assert serial.run(lambda: threading.current_thread()) is threading.current_thread()


def test_stopping_refuses_what_waits_and_what_comes_after() -> None:
    serial = Serial()
    ran: list[str] = []
    dropped: list[str] = []
    serial.hand_over(lambda: ran.append("handed"), lambda: dropped.append("handed"))
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            serial.run(lambda: ran.append("asked"))
        except DaemonStopping as exc:
            outcome.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    while asker.is_alive() and serial._jobs.qsize() < 2:  # its job is queued
        asker.join(timeout=0.01)
    serial.close()
    asker.join(timeout=30)
    assert ran == [] and dropped == ["handed"] and len(outcome) == 1
    with pytest.raises(DaemonStopping):
        serial.hand_over(lambda: None, lambda: None)
    late = threading.Thread(target=ask)
    late.start()
    late.join(timeout=30)
    assert ran == [] and len(outcome) == 2
