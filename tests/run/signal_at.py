"""`python signal_at.py POINT SIGNAL PLAN`: `perfmodel run PLAN --synthetic` on a local Ray, this process sending
itself SIGNAL (SIGTERM, SIGINT) at POINT: "init" (ray.init has just returned; Ray's own SIGTERM handlers are
still set) or "shutdown" (ray.shutdown has just returned: every batch done, Ray being stopped). Points in the
code, not times: the test is the same on a loaded machine. Its last line of stderr is JSON: the processes the
run had started (the keeper, Ray's) and its Ray folder, to check that they are gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys

import psutil

from perfmodel.cli import main
from perfmodel.run import cluster

point, sig, plan = sys.argv[1], signal.Signals[sys.argv[2]], sys.argv[3]
started: dict = {}
first_import = cluster._as_first_import


@contextlib.contextmanager
def hooked(settings):
    """connect imports ray before this (with the local Ray's settings) and calls ray.init inside it."""
    import ray

    original = getattr(ray, point)

    def call_then_signal(*args, **kwargs):
        result = original(*args, **kwargs)
        os.kill(os.getpid(), sig)
        return result

    setattr(ray, point, call_then_signal)
    with first_import(settings):
        yield


def stop(self, original=cluster.LocalRay.stop):
    started["pids"] = [p.pid for p in psutil.Process().children(recursive=True)]
    started["folder"] = str(self.temp_dir)
    original(self)


cluster._as_first_import = hooked
cluster.LocalRay.stop = stop
try:
    code = main(["run", plan, "--synthetic"])
finally:
    print(json.dumps(started), file=sys.stderr)
sys.exit(code)
