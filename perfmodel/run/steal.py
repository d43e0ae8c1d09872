"""The queue of unstarted batches, held by a small Ray actor on the driver's node: one list per worker,
and the batches of lost workers, put back to be re-run.

A worker takes its own batches in order; once they are gone, the batches put back after a lost node
(of its input size), then, with --steal (off by default), the last unstarted batch of the worker of its
input size that has the most planned time left (unstarted batches x that worker's planned batch time).
A stolen or put-back batch larger than the taker's planned batch size is split into pieces no larger
(a worker runs the shape its profile timed, and cannot run out of memory on a larger one): it takes the
first, and the others wait, first in line, for the next worker of that input size to run out.
A batch counts as started when it is taken, and the queue remembers who took it: when a worker is lost
with its node, every batch it took and did not finish, and its own unstarted ones, are put back; one
larger than the smallest batch size of the survivors of its input size is put back in pieces no larger
(a survivor with a smaller GPU must not run out of memory on it): each piece is a new batch of the same
owner, numbered after its given ones, and the batch it replaces is remembered in `replaced`.
"""

from __future__ import annotations


class BatchQueue:
    def __init__(
        self,
        queues: dict[int, list],
        sizes: dict[int, int],
        batch_s: dict[int, float],
        steal: bool,
        batch_sizes: dict[int, int] | None = None,  # each worker's planned batch size; None: never split
    ):
        self.batch_sizes, self.lost = batch_sizes, set()
        self.replaced: dict[tuple[int, int], list[tuple[int, int]]] = {}  # put back in pieces: batch -> pieces
        self.queues = {w: list(items) for w, items in queues.items()}
        self.next = {w: 0 for w in queues}  # own batches are taken from the front
        self.end = {w: len(items) for w, items in queues.items()}  # stolen ones from the back
        self.sizes, self.batch_s, self.steal = sizes, batch_s, steal
        self.taken: dict[tuple[int, int], int] = {}  # (owner, batch number) -> the worker that took it
        # Batches of lost workers, and the rest of stolen ones split for the thief, in the order they are run.
        self.put_back: list[tuple[int, int]] = []

    def take(self, worker: int):
        """(owner, batch number, items) for `worker`, or None when nothing is left for it."""
        item = self._next_for(worker)
        if item is not None:
            self.taken[item[:2]] = worker
        return item

    def _next_for(self, worker: int):
        if self.next[worker] < self.end[worker]:
            self.next[worker] += 1
            return worker, self.next[worker] - 1, self.queues[worker][self.next[worker] - 1]
        mine = next((k for k, key in enumerate(self.put_back) if self.sizes[key[0]] == self.sizes[worker]), None)
        if mine is not None:
            return self._fitted(self.put_back.pop(mine), worker)
        if not self.steal:
            return None
        victims = [
            w for w in self.queues if w != worker and self.sizes[w] == self.sizes[worker] and self.next[w] < self.end[w]
        ]
        if not victims:
            return None
        victim = max(victims, key=lambda w: (self.end[w] - self.next[w]) * self.batch_s[w])
        self.end[victim] -= 1
        return self._fitted((victim, self.end[victim]), worker)

    def _fitted(self, key: tuple[int, int], worker: int):
        """Batch `key` for `worker`, or, when it is larger than the worker's batch size, its first piece of
        that size; the other pieces go first in line for the next worker of its input size to run out."""
        pieces = self._split(key, self.batch_sizes[worker]) if self.batch_sizes else [key]
        self.put_back[:0] = pieces[1:]
        owner, number = pieces[0]
        return owner, number, self.queues[owner][number]

    def lose(self, worker: int, done: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Put back what `worker` (lost with its node) took and did not finish (`done`: every batch whose
        record reached the driver), and its own unstarted batches; returns them as (owner, batch)."""
        finished = {tuple(d) for d in done}
        back = [key for key, taker in self.taken.items() if taker == worker and key not in finished]
        back += [(worker, n) for n in range(self.next[worker], self.end[worker])]
        self.next[worker] = self.end[worker]
        for key in back:
            self.taken.pop(key, None)
        self.lost.add(worker)
        back = [piece for key in sorted(back) for piece in self._pieces(key)]
        self.put_back += back
        return back

    def _pieces(self, key: tuple[int, int]) -> list[tuple[int, int]]:
        """`key` itself, or the new batches it is split into for the smallest survivor of its input size."""
        owner = key[0]
        limits = [
            size
            for w, size in (self.batch_sizes or {}).items()
            if w not in self.lost and self.sizes[w] == self.sizes[owner]
        ]
        return self._split(key, min(limits)) if limits else [key]

    def _split(self, key: tuple[int, int], limit: int) -> list[tuple[int, int]]:
        """`key` itself, or the new batches of its owner (numbered after its others) it is split into, each of
        at most `limit` images; `replaced` remembers which."""
        owner, number = key
        pieces = split(self.queues[owner][number], limit)
        if len(pieces) <= 1:
            return [key]
        first = len(self.queues[owner])
        self.queues[owner] += pieces
        self.replaced[key] = [(owner, first + k) for k in range(len(pieces))]
        return self.replaced[key]

    def state(self) -> tuple[dict[int, list], dict[tuple[int, int], list[tuple[int, int]]]]:
        """Every worker's batches (pieces of split ones included) and the batches put back in pieces."""
        return self.queues, self.replaced

    def has_work(self, worker: int) -> bool:
        """Whether take(worker) would give it a batch now (without taking it)."""
        if self.next[worker] < self.end[worker]:
            return True
        if any(self.sizes[owner] == self.sizes[worker] for owner, _ in self.put_back):
            return True
        return self.steal and any(
            w != worker and self.sizes[w] == self.sizes[worker] and self.next[w] < self.end[w] for w in self.queues
        )


def split(item, limit: int) -> list:
    """A batch (file list, or image count on random inputs) in pieces of at most `limit` images, in order."""
    if isinstance(item, int):
        return [min(limit, item - k) for k in range(0, item, limit)] or [item]
    return [item[k : k + limit] for k in range(0, len(item), limit)] or [item]
