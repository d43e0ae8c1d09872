"""Work stealing (--steal, off by default): one queue of unstarted batches per worker, held by a small
Ray actor. A worker takes its own batches in order; once they are gone it takes the last unstarted
batch of the worker of its input size that has the most planned time left (unstarted batches x that
worker's planned batch time). A batch counts as started when it is taken.
"""

from __future__ import annotations


class BatchQueue:
    def __init__(self, queues: dict[int, list], sizes: dict[int, int], batch_s: dict[int, float], steal: bool):
        self.queues = {w: list(items) for w, items in queues.items()}
        self.next = {w: 0 for w in queues}  # own batches are taken from the front
        self.end = {w: len(items) for w, items in queues.items()}  # stolen ones from the back
        self.sizes, self.batch_s, self.steal = sizes, batch_s, steal

    def take(self, worker: int):
        """(owner, batch number, items) for `worker`, or None when nothing is left for it."""
        if self.next[worker] < self.end[worker]:
            self.next[worker] += 1
            return worker, self.next[worker] - 1, self.queues[worker][self.next[worker] - 1]
        if not self.steal:
            return None
        victims = [
            w for w in self.queues if w != worker and self.sizes[w] == self.sizes[worker] and self.next[w] < self.end[w]
        ]
        if not victims:
            return None
        victim = max(victims, key=lambda w: (self.end[w] - self.next[w]) * self.batch_s[w])
        self.end[victim] -= 1
        return victim, self.end[victim], self.queues[victim][self.end[victim]]
