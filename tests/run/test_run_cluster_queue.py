"""The batch queue when a worker is lost with its node (no Ray needed): what it took and did not finish,
and its own unstarted batches, go back to the survivors of its input size, each batch once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from perfmodel.run.steal import BatchQueue, split


def queue(steal: bool = False) -> BatchQueue:
    own = {0: ["a0", "a1", "a2", "a3"], 1: ["b0", "b1"], 2: ["c0"]}
    return BatchQueue(own, {0: 32, 1: 32, 2: 64}, {0: 1.0, 1: 1.0, 2: 1.0}, steal)


def test_a_lost_worker_gives_back_what_it_took_and_did_not_finish_and_its_unstarted_batches():
    q = queue()
    assert [q.take(0)[:2] for _ in range(2)] == [(0, 0), (0, 1)]  # a0 finished, a1 under way when lost
    assert q.lose(0, done=[(0, 0)]) == [(0, 1), (0, 2), (0, 3)]
    assert q.take(2)[:2] == (2, 0) and not q.has_work(2)  # another input size cannot take them
    assert [q.take(1)[:2] for _ in range(5)] == [(1, 0), (1, 1), (0, 1), (0, 2), (0, 3)]  # own batches first
    assert q.take(1) is None and q.take(2) is None


def test_a_worker_that_finished_has_work_again_after_a_loss():
    q = queue()
    q.take(0)
    assert q.take(1) and q.take(1) and q.take(1) is None and not q.has_work(1)
    q.lose(0, done=[])
    assert q.has_work(1) and q.take(1)[:2] == (0, 0)


def test_batches_a_lost_worker_stole_go_back_too():
    q = queue(steal=True)
    assert q.take(1)[:2] == (1, 0) and q.take(1)[:2] == (1, 1) and q.take(1)[:2] == (0, 3)  # stolen from 0
    assert q.lose(1, done=[(1, 0), (1, 1)]) == [(0, 3)]
    assert [q.take(0)[:2] for _ in range(4)] == [(0, 0), (0, 1), (0, 2), (0, 3)] and q.take(0) is None


@given(st.lists(st.tuples(st.integers(0, 2), st.booleans()), max_size=40), st.booleans())
def test_every_batch_is_run_exactly_once_whoever_is_lost(steps, steal):
    """Random takes and finishes; workers 0 and 1 (one size) may be lost, never both: each batch ends
    up finished exactly once."""
    q = BatchQueue({0: list(range(5)), 1: list(range(3)), 2: [0, 1]}, {0: 1, 1: 1, 2: 2}, {0: 1, 1: 1, 2: 1}, steal)
    holding = {0: [], 1: [], 2: []}
    finished: list[tuple[int, int]] = []
    lost: set[int] = set()
    for worker, lose in steps:
        if worker in lost:
            continue
        if lose and worker in (0, 1) and not lost:
            q.lose(worker, finished)
            lost.add(worker)
            holding[worker] = []
            continue
        item = q.take(worker)
        if item is not None:
            holding[worker].append(item[:2])
        if holding[worker]:
            finished.append(holding[worker].pop(0))
    for worker in (0, 1, 2):  # the survivors drain the queue
        if worker in lost:
            continue
        while (item := q.take(worker)) is not None:
            holding[worker].append(item[:2])
        finished += holding[worker]
    everything = [(0, n) for n in range(5)] + [(1, n) for n in range(3)] + [(2, 0), (2, 1)]
    assert sorted(finished) == everything


@given(st.one_of(st.integers(0, 300), st.lists(st.integers(), max_size=300)), st.integers(1, 64))
def test_split_keeps_every_image_once_in_order_and_no_piece_over_the_limit(item, limit):
    pieces = split(item, limit)
    if isinstance(item, int):
        assert sum(pieces) == item and all(0 <= n <= limit for n in pieces)
        assert all(pieces) or pieces == [0]
    else:
        assert [x for piece in pieces for x in piece] == item and all(len(p) <= limit for p in pieces)
        assert all(pieces) or pieces == [[]]


def test_a_lost_larger_batch_is_put_back_in_pieces_no_larger_than_the_smallest_survivor():
    """Worker 0 (batch 8) is lost; the survivors of its input size plan batches of 3 and 5: every piece <= 3.
    Worker 2 (batch 2, another input size) does not bound them."""
    files = [f"f{i}" for i in range(20)]
    own = {0: [files[0:8], files[8:16], files[16:20]], 1: [["g0", "g1", "g2"]], 2: [["h0", "h1"]], 3: [["k0"]]}
    q = BatchQueue(own, {0: 64, 1: 64, 2: 32, 3: 64}, {w: 1.0 for w in own}, False, {0: 8, 1: 3, 2: 2, 3: 5})
    assert q.take(0)[:2] == (0, 0)  # under way when lost
    back = q.lose(0, done=[])
    assert back == [(0, n) for n in range(3, 11)]  # 8 -> 3+3+2, 8 -> 3+3+2, 4 -> 3+1: new batches of worker 0
    ran = []
    for worker in (1, 3) * 6:
        item = q.take(worker)
        if item is not None:
            ran.append(item)
    assert q.take(1) is None and q.take(3) is None
    assert all(len(content) <= 3 for owner, _, content in ran if owner == 0)
    assert sorted(x for owner, _, content in ran if owner == 0 for x in content) == sorted(files)  # each once
    assert q.replaced == {(0, 0): [(0, 3), (0, 4), (0, 5)], (0, 1): [(0, 6), (0, 7), (0, 8)], (0, 2): [(0, 9), (0, 10)]}
    queues, _ = q.state()
    assert queues[0][3:] == [files[k : k + 3] if k % 8 < 6 else files[k : k + 2] for k in (0, 3, 6, 8, 11, 14)] + [
        files[16:19],
        files[19:20],
    ]


def test_without_batch_sizes_or_survivors_a_lost_batch_is_put_back_whole():
    q = BatchQueue({0: [list("abcdefgh")], 1: [["x"]]}, {0: 1, 1: 2}, {0: 1.0, 1: 1.0}, False, {0: 8, 1: 1})
    assert q.lose(0, done=[]) == [(0, 0)] and not q.replaced  # worker 1 has another input size
    q = BatchQueue({0: [list("abcdefgh")], 1: [["x"]]}, {0: 1, 1: 1}, {0: 1.0, 1: 1.0}, False)
    assert q.lose(0, done=[]) == [(0, 0)] and not q.replaced


def test_a_stolen_batch_larger_than_the_thiefs_is_split_to_its_batch_size():
    """U6: with --steal, cpu#1 (batch 1, 2 batches) ran cpu#0's 4-image batches, a shape never timed."""
    q = BatchQueue({0: [4] * 25, 1: [1, 1]}, {0: 32, 1: 32}, {0: 0.01, 1: 0.005}, True, {0: 4, 1: 1})
    assert [q.take(1) for _ in range(2)] == [(1, 0, 1), (1, 1, 1)]  # its own
    assert q.take(1) == (0, 25, 1)  # a piece of cpu#0's last batch, numbered after its 25
    assert q.replaced == {(0, 24): [(0, 25), (0, 26), (0, 27), (0, 28)]}
    assert [q.take(1) for _ in range(3)] == [(0, 26, 1), (0, 27, 1), (0, 28, 1)]  # the rest: before stealing again
    assert q.take(0) == (0, 0, 4)  # the victim runs its own, at its own size
    assert q.take(1) == (0, 29, 1)  # the next steal, split again


@given(st.lists(st.integers(0, 2), max_size=80), st.lists(st.integers(1, 9), min_size=3, max_size=3))
def test_stealing_runs_every_image_once_never_above_the_takers_batch_size(order, sizes):
    """Random takes by three workers of one input size and their own batch sizes, with --steal: each
    worker's images are run once in all, and no worker runs a batch larger than its own size."""
    own = {w: [sizes[w]] * 3 + [max(1, sizes[w] // 2)] for w in range(3)}
    q = BatchQueue(own, {0: 32, 1: 32, 2: 32}, {0: 1.0, 1: 2.0, 2: 3.0}, True, dict(enumerate(sizes)))
    ran = []
    for worker in order + [0, 1, 2] * 40:  # then every worker until nothing is left
        item = q.take(worker)
        if item is not None:
            assert item[2] <= sizes[worker]
            ran.append(item)
    assert all(q.take(w) is None for w in range(3))
    queues, replaced = q.state()
    counted = {w: [(w, n) for n in range(len(queues[w])) if (w, n) not in replaced] for w in range(3)}
    assert sorted(item[:2] for item in ran) == sorted(k for w in range(3) for k in counted[w])  # each once
    assert {w: sum(queues[w][n] for _, n in counted[w]) for w in range(3)} == {w: sum(own[w]) for w in range(3)}


def test_the_rest_of_a_stolen_batch_is_split_again_for_a_smaller_taker():
    q = BatchQueue({0: [4, 4], 1: [], 2: []}, {0: 32, 1: 32, 2: 32}, {0: 1.0, 1: 1.0, 2: 1.0}, True, {0: 4, 1: 2, 2: 1})
    assert q.take(1) == (0, 2, 2)  # cpu#0's last batch, split in two for worker 1 (batch 2)
    assert q.take(2) == (0, 4, 1)  # the other half, split again for worker 2 (batch 1)
    assert q.take(2) == (0, 5, 1) and q.take(0) == (0, 0, 4) and q.take(0) is None
    assert q.replaced == {(0, 1): [(0, 2), (0, 3)], (0, 3): [(0, 4), (0, 5)]}
