"""--server-cpus: the local Triton server on some cores, the load generator on the others."""

from __future__ import annotations

import os
import threading

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.errors import DeviceError, InputError
from perfmodel.profile.affinity import parse_cpus, pinned_apart_from, shown_cpus

USABLE = sorted(os.sched_getaffinity(0))
TWO_CORES = pytest.mark.skipif(len(USABLE) < 2, reason="needs two usable cores")


@TWO_CORES
def test_parse_cpus_reads_numbers_and_ranges():
    first, last = USABLE[0], USABLE[-1]
    assert parse_cpus(str(first)) == (first,)
    assert parse_cpus(f" {last} , {last}") == (last,)
    if len(USABLE) >= 3 and USABLE[1] == first + 1:
        assert parse_cpus(f"{first}-{first + 1}") == (first, first + 1)


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "core numbers or ranges"),
        ("1,,2", "core numbers or ranges"),
        ("3-1", "core numbers or ranges"),
        ("١", "core numbers or ranges"),
        ("1.5", "core numbers or ranges"),
        ("99999", "not one this process may use"),
        (f"{USABLE[0]}-{USABLE[-1]}", "leave at least one"),
    ],
)
def test_parse_cpus_refuses_in_one_sentence(text, says):
    with pytest.raises(InputError, match=says) as err:
        parse_cpus(text)
    assert str(err.value).count("\n") == 0


@given(st.text(max_size=12))
def test_parse_cpus_answers_any_text_with_cores_or_an_input_error(text):
    try:
        cores = parse_cpus(text)
    except InputError:
        return
    assert cores and set(cores) < set(USABLE)


@given(st.sets(st.integers(0, 300), min_size=1, max_size=20))
def test_shown_cpus_is_compact_and_complete(cores):
    text = shown_cpus(cores)
    back = set()
    for item in text.split(","):
        first, _, last = item.partition("-")
        back.update(range(int(first), int(last or first) + 1))
    assert back == cores and text.count(",") < len(cores)


@TWO_CORES
def test_pinned_apart_from_moves_running_threads_and_restores():
    started, stop = threading.Event(), threading.Event()
    ids = []

    def wait():
        ids.append(threading.get_native_id())
        started.set()
        stop.wait(30)

    worker = threading.Thread(target=wait)
    worker.start()
    started.wait(30)
    try:
        with pinned_apart_from([USABLE[0]]):
            assert os.sched_getaffinity(0) == set(USABLE[1:])
            assert os.sched_getaffinity(ids[0]) == set(USABLE[1:])  # started before the block, moved too
        assert os.sched_getaffinity(0) == set(USABLE) and os.sched_getaffinity(ids[0]) == set(USABLE)
        with pinned_apart_from(()):  # no server cores named: nothing moves
            assert os.sched_getaffinity(0) == set(USABLE)
    finally:
        stop.set()
        worker.join()


@TWO_CORES
@pytest.mark.triton
def test_local_server_and_all_its_processes_run_on_the_cores_named():
    try:
        import pytriton  # noqa: F401

        from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings
    except ImportError as exc:
        pytest.skip(f"nvidia-pytriton is not installed ({exc})")
    core = USABLE[-1]
    try:
        with LocalTritonServer(ServerSettings("tiny", max_batch_size=4, cpus=(core,)), start_timeout_s=240) as server:
            tree = [psutil.Process(server.pid), *psutil.Process(server.pid).children(recursive=True)]
            assert len(tree) >= 2  # the server program and tritonserver, at least
            assert {tuple(p.cpu_affinity()) for p in tree} == {(core,)}
            assert server.info.provenance["server_cpus"] == str(core)
    except DeviceError as exc:
        pytest.skip(f"the bundled Triton server cannot start here: {exc}")
