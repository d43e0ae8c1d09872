"""The in-process PyTorch backend: load a model, bind inputs, run one blocking call at a time.

Used by the profiler's measuring worker (steady state), its fresh warm-up workers, the Triton server
program and `perfmodel run`, so all of them run exactly the same code; it lives beside perfmodel/models.py
(what to build) outside perfmodel/profile/ because profiling and running share it.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from perfmodel import loading, memory
from perfmodel.errors import DeviceError, InputError
from perfmodel.models import ModelSpec, import_model_code

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
# torch.compile's modes perfmodel measures. reduce-overhead and max-autotune capture CUDA graphs of their own
# on a GPU (Inductor's cudagraph trees); on a CPU, max-autotune tunes its C++ GEMM templates and
# reduce-overhead would be the default mode under another name, so it is refused there.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
_GRAPHING_MODES = ("reduce-overhead", "max-autotune")
# Below this size per batch the steady state rotates between three input batches, so that no cache
# flatters the numbers; a larger batch is larger than any cache, and holding three of them would move
# the out-of-memory boundary, so it uses one (see TorchRunner.input_count).
ROTATE_BELOW_MB = 256.0
# The optional parts of a backend name, in the order TorchOptions.backend_name writes them.
_BACKEND_PARTS = (("channels-last", "channels_last"), ("compile", "compile"), ("cuda-graphs", "cuda_graphs"))


@dataclass(frozen=True)
class CompileCounts:
    """torch.compile's running totals in one process (TorchRunner.compile_counts)."""

    graphs: int  # graphs compiled (one per batch shape when nothing recompiles)
    seconds: float  # time spent compiling (Dynamo's timer; NaN where this torch lacks it)
    graph_skips: int  # graphs for which Inductor gave up its CUDA graphs (reduce-overhead, max-autotune)

    def since(self, before: CompileCounts) -> CompileCounts:
        return CompileCounts(
            self.graphs - before.graphs, self.seconds - before.seconds, self.graph_skips - before.graph_skips
        )


@dataclass(frozen=True)
class TorchOptions:
    """How the model runs: device, precision and the optional speed-ups."""

    device: str = "cpu"
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    cuda_graphs: bool = False
    threads: int | None = None  # intra-op threads; None leaves torch's default
    compile_mode: str = "default"  # torch.compile's mode (COMPILE_MODES), with compile

    def __post_init__(self):
        if self.compile_mode not in COMPILE_MODES:
            raise InputError(f"unknown compile mode {self.compile_mode!r}: choose one of {', '.join(COMPILE_MODES)}.")
        if self.compile_mode != "default" and not self.compile:
            raise InputError(f"`compile_mode` {self.compile_mode} is a mode of torch.compile: add `compile`.")
        if self.compile and self.compile_mode == "reduce-overhead" and not self.device.startswith("cuda"):
            raise InputError(
                "`compile_mode` reduce-overhead is torch.compile with CUDA graphs, for CUDA devices; on a CPU it "
                "would be the default mode under another name: use `compile_mode` default or max-autotune."
            )
        if self.cuda_graphs and self.compile_mode in _GRAPHING_MODES:
            raise InputError(
                f"`compile_mode` {self.compile_mode} captures CUDA graphs of its own: leave `cuda_graphs` out (or "
                "use `compile_mode` default with `cuda_graphs`)."
            )
        if self.precision not in PRECISIONS:
            raise InputError(f"unknown precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}.")
        if self.precision == "tf32" and not self.device.startswith("cuda"):
            raise InputError(
                "`precision` tf32 (fp32 storage, TF32 tensor-core math) is for CUDA GPUs; use fp32 on a CPU."
            )
        if self.cuda_graphs and not self.device.startswith("cuda"):
            raise InputError("`cuda_graphs` needs a CUDA device: set `device` cuda, or leave `cuda_graphs` out.")
        if self.threads is not None and self.threads < 1:
            raise InputError(f"`threads` must be a positive whole number, not {self.threads}.")

    @property
    def backend_name(self) -> str:
        """The profile's `backend` column: torch, torch-compile, torch-compile-max-autotune,
        torch-channels-last-cuda-graphs ... (a compile mode other than default follows `compile`)."""
        parts = ["torch"]
        for part, flag in _BACKEND_PARTS:
            if getattr(self, flag):
                parts.append(part)
                if flag == "compile" and self.compile_mode != "default":
                    parts.append(self.compile_mode)
        return "-".join(parts)

    @property
    def warmup_includes(self) -> str:
        """What the first call at a batch size does besides running the model (the profile's
        `warmup_includes`): compile (Dynamo and Inductor, for this shape), cudnn-autotune (cudnn.benchmark
        on CUDA), graph-capture (three eager calls, the capture, then the replay), then run."""
        cuda = self.device.startswith("cuda")
        steps = [("compile", self.compile), ("cudnn-autotune", cuda), ("graph-capture", self.captures_graphs)]
        return "+".join([name for name, done in steps if done] + ["run"])

    @property
    def captures_graphs(self) -> bool:
        """Whether batches replay CUDA graphs: ours (cuda_graphs), or torch.compile's in a mode that captures them."""
        graphing = self.cuda_graphs or (self.compile and self.compile_mode in _GRAPHING_MODES)
        return self.device.startswith("cuda") and graphing

    @classmethod
    def from_backend(cls, backend: str, **kwargs) -> TorchOptions:
        """The options a profile's `backend` name stands for (its inverse): torch-channels-last-cuda-graphs
        gives channels_last and cuda_graphs. InputError for a name no TorchOptions writes."""
        flags = parse_backend(backend)
        if flags is None:
            raise InputError(f"{backend!r} is not a PyTorch backend perfmodel runs ({', '.join(BACKENDS)}).")
        return cls(**kwargs, **flags)


def parse_backend(backend: str) -> dict | None:
    """{channels_last, compile, cuda_graphs, compile_mode} of a backend name TorchOptions.backend_name
    writes; None otherwise."""
    rest, flags = backend, {"compile_mode": "default"}
    if not (rest == "torch" or rest.startswith("torch-")):
        return None
    rest = rest[len("torch") :]
    for part, flag in _BACKEND_PARTS:
        flags[flag] = rest.startswith(f"-{part}")
        if flags[flag]:
            rest = rest[len(part) + 1 :]
            if flag == "compile":
                mode = next((m for m in _GRAPHING_MODES if rest.startswith(f"-{m}")), None)
                if mode is not None:
                    flags["compile_mode"], rest = mode, rest[len(mode) + 1 :]
    return flags if rest == "" else None


def _backends() -> dict[str, TorchOptions]:
    options_of = {}
    for channels_last, cuda_graphs in itertools.product((False, True), repeat=2):
        for compile_mode in (None, *COMPILE_MODES):
            if cuda_graphs and compile_mode in _GRAPHING_MODES:
                continue
            options = TorchOptions(
                "cuda",
                channels_last=channels_last,
                compile=compile_mode is not None,
                cuda_graphs=cuda_graphs,
                compile_mode=compile_mode or "default",
            )
            options_of[options.backend_name] = options
    return options_of


# Every backend name the in-process PyTorch backend can write into a profile, so every one a plan can name,
# with the options it stands for on a GPU (read once here: a plan's rows look theirs up).
BACKEND_OPTIONS = _backends()
BACKENDS = tuple(BACKEND_OPTIONS)


def compile_model(model, mode: str = "default"):
    """torch.compile as perfmodel measures and runs it: lazily (it compiles at the first call of each batch
    shape, the warm-up), static shapes (dynamic=False), the whole model as one graph (fullgraph=True: a graph
    break fails the point, rather than timing a model that runs partly eager), and with Inductor's freezing,
    as PyTorch advises for inference: the weights become constants (batch norms folded into convolutions,
    weights prepacked). Freezing is a setting of the process; every runner has a process of its own.
    ResNet-50 at 64 px, batch 8, this 2-core VM (load 11): compiled without freezing 711 ms a call, eager
    591, with freezing 386 (first call 238 s without, 158 s with)."""
    import torch
    import torch._inductor.config

    torch._inductor.config.freezing = True
    return torch.compile(model, dynamic=False, fullgraph=True, mode=None if mode == "default" else mode)


def check_device(device: str) -> str:
    """Normalise and check `device`; DeviceError when it is not on this machine."""
    import torch

    device = device.strip().lower()
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        index = device.partition(":")[2] or "0"
        if not re.fullmatch(r"[0-9]{1,4}", index):  # not str.isdigit(): '²' is a digit there, and int('²') fails
            raise InputError(f"unknown device {device!r}: use cpu, cuda or cuda:N (N a GPU index).")
        if not torch.cuda.is_available():
            raise DeviceError(
                f"`device` {device} asks for a GPU, but torch finds no CUDA device here; use `device` cpu."
            )
        count = torch.cuda.device_count()
        if int(index) >= count:
            raise DeviceError(f"`device` {device}: this machine has {count} CUDA device(s), numbered 0 to {count - 1}.")
        return f"cuda:{index}"
    raise InputError(f"unknown device {device!r}: use cpu, cuda or cuda:N.")


class TorchRunner:
    """One loaded model on one device, ready to time."""

    def __init__(self, spec: ModelSpec, options: TorchOptions, seed: int = 0):
        t0 = time.perf_counter()
        import torch

        import_model_code(spec)  # part of a process's start, as torch is: never inside the load's time
        if options.compile:
            import torch._dynamo  # the same: a module import (2 s on a CPU), not a load

            # torch.compile's first wrap imports its backend's modules (0.8 s on a CPU): a throwaway wrap does
            # it here, so that the load of a compiled model is eager's (compilation is the first call's).
            compile_model(torch.nn.Identity())
        self.import_ms = (time.perf_counter() - t0) * 1e3  # ~0 where they were imported before
        self.torch = torch
        self.spec = spec
        self.options = options
        self.seed = seed
        self.device = torch.device(options.device)
        if self.device.type == "cuda" and self.device.index is None:  # torch.cuda's memory calls need the index
            self.device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
        self.dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[
            options.precision
        ]
        self.is_cuda = self.device.type == "cuda"
        if options.threads is not None:  # process-wide, not restored: every runner has a process of its own
            torch.set_num_threads(options.threads)
        if self.is_cuda:
            # Let cuDNN pick the fastest kernels per shape, as serving stacks do; that autotuning
            # is part of the first call's warm-up.
            torch.backends.cudnn.benchmark = True
            # PyTorch lets cuDNN convolutions use TF32 by default: fp32 means true fp32 here, and
            # TF32 is its own precision, so that the profile says which math was measured.
            tf32 = options.precision == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
        if options.compile:
            # Each batch size is its own static shape: one graph each, and enough room for a sweep's.
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
        self.baseline_rss_mb = memory.rss_mb()  # before the model: CPU memory counts from here
        self.model = None
        self.start_parts: dict[str, float] | None = None
        self.load_ms: float | None = None
        self.load_parts: dict[str, float] = {}
        self._graphs: dict[tuple, Callable] = {}  # forward's captured graphs, by input shape

    def start(self) -> dict[str, float]:
        """Open the device, once: with the imports of __init__, what a process pays before its first load
        ({start_import_ms, start_device_ms}; perfmodel/loading.py). CPU memory counts from after it."""
        if self.start_parts is None:
            self.start_parts = {"start_import_ms": self.import_ms, "start_device_ms": loading.open_device(self.device)}
            self.baseline_rss_mb = memory.rss_mb()
        return self.start_parts

    def load(self, weights: str | None = None) -> float:
        """Build the model on the device, with the weights of the file `weights` (a state_dict) or random
        ones; return the time it took in ms, whose parts go to `load_parts` ({load_build_ms,
        load_weights_ms}). Starts the process first if `start` was not called (not timed here)."""
        torch = self.torch
        self.start()
        t0 = time.perf_counter()
        with self._flushing():  # torch's CPU thread pool, if it starts here, inherits the setting
            model = loading.build(self.spec, self.device, self.seed, weights)
            self.sync()
            t1 = time.perf_counter()
            model = loading.place_weights(model, self.spec, self.device, self.dtype, weights)
            if self.options.channels_last:
                model = model.to(memory_format=torch.channels_last)
            if self.options.compile:
                model = compile_model(model, self.options.compile_mode)
            self.sync()
        t2 = time.perf_counter()
        self.model = model
        self.load_parts = {"load_build_ms": (t1 - t0) * 1e3, "load_weights_ms": (t2 - t1) * 1e3}
        self.load_ms = (t2 - t0) * 1e3
        return self.load_ms

    def compile_counts(self) -> CompileCounts | None:
        """What torch.compile did in this process so far, from Dynamo's and Inductor's own counters; None
        without --compile. The differences around a call say what that call compiled."""
        if not self.options.compile:
            return None
        from torch._dynamo import utils

        try:  # a private timer (torch 2.1 to 2.13 at least): without it the seconds are unknown, not zero
            seconds = float(utils.calculate_time_spent().get("entire_frame_compile", 0.0))
        except Exception:
            seconds = math.nan
        return CompileCounts(
            int(utils.counters["stats"]["unique_graphs"]), seconds, int(utils.counters["inductor"]["cudagraph_skips"])
        )

    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)

    def batch_mb(self, batch_size: int, input_size: int) -> float:
        """The size of one input batch (MiB)."""
        return batch_size * 3 * input_size * input_size * (self.torch.finfo(self.dtype).bits // 8) / 2**20

    def input_count(self, batch_size: int, input_size: int, budget_mb: float | None = None) -> int:
        """How many input batches the steady state rotates between: three while a batch is under
        ROTATE_BELOW_MB and the two extra ones take under 1% of the memory budget, else one (so that
        rotation never moves the out-of-memory boundary)."""
        limit = ROTATE_BELOW_MB if budget_mb is None else min(ROTATE_BELOW_MB, budget_mb / 200)
        return 3 if self.batch_mb(batch_size, input_size) <= limit else 1

    def inputs(self, batch_size: int, input_size: int, count: int = 3) -> list:
        """A few random image batches (never zeros) to rotate between.

        Drawn where they are used, with a generator of that device, directly in the measured dtype
        and memory format: no host copy, no conversion, no second buffer (at 13 000 images, a
        host-side draw and copy takes a minute).
        """
        torch = self.torch
        generator = torch.Generator(device=self.device).manual_seed(self.seed + batch_size * 7919 + input_size)
        layout = torch.channels_last if self.options.channels_last else torch.contiguous_format
        batches = [
            torch.empty(
                (batch_size, 3, input_size, input_size), device=self.device, dtype=self.dtype, memory_format=layout
            ).normal_(generator=generator)
            for _ in range(count)
        ]
        self.sync()
        return batches

    @contextlib.contextmanager
    def inference(self) -> Iterator[None]:
        """The context every call runs in: no autograd bookkeeping and, on a CPU, subnormals flushed to
        zero. Entered once around many calls, not per call, so that it adds nothing to the timed calls."""
        with self._flushing(), self.torch.inference_mode():
            yield

    @contextlib.contextmanager
    def _flushing(self) -> Iterator[None]:
        """On a CPU, flush subnormals to zero (random weights can make them, and they slow CPUs down) in
        this thread until the context ends, then put back what was there: the setting is per thread and
        torch cannot read it, and left on it makes numpy warn that the smallest subnormal is zero."""
        if self.is_cuda:
            yield
            return
        before = sys.float_info.min / 2.0 == 0.0  # a subnormal result is flushed to zero: already on
        self.torch.set_flush_denormal(True)
        try:
            yield
        finally:
            self.torch.set_flush_denormal(before)

    def bind(self, inputs: list) -> Callable[[int], None]:
        """Return call(i): run the model on inputs[i % len(inputs)] and wait until it is done.

        Call it inside `inference()`. Kept minimal, since its overhead is part of every timed call.
        """
        if self.options.cuda_graphs:
            return self._bind_graph(inputs)
        model, n = self.model, len(inputs)
        if not self.is_cuda:

            def call(i: int) -> None:
                model(inputs[i % n])

            return call
        synchronize, device = self.torch.cuda.synchronize, self.device

        def call_cuda(i: int) -> None:
            model(inputs[i % n])
            synchronize(device)

        return call_cuda

    def _bind_graph(self, inputs: list) -> Callable[[int], None]:
        """CUDA graphs: capture lazily on the first call, so that the capture counts as warm-up. With a
        single input batch, that batch is the graph's static input (no second copy)."""
        graph = None

        def call(i: int) -> None:
            nonlocal graph
            if graph is None:
                graph = self._capture(inputs[0] if len(inputs) == 1 else inputs[0].clone())
            graph(inputs[i % len(inputs)])
            self.sync()

        return call

    def _capture(self, static_in) -> Callable:
        """Capture the model on `static_in`; return replay(x) -> the graph's output tensor (overwritten
        by the next replay), copying x into the static input first unless it is that input.

        The eager calls before the capture do the lazy work (cuDNN's choice, handles); their
        activations then sit in the allocator's cache, which the graph's private pool cannot use, so
        the cache is emptied first (else the largest batch that captures is about half the one that
        fits). The memory peak is reset just before the capture: the graph's pool is allocated during
        the capture and never again, so the peak must include it.
        """
        torch, model = self.torch, self.model
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        self.sync()
        torch.cuda.empty_cache()
        self.reset_peak()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_in)

        def replay(x):
            if x is not static_in:
                static_in.copy_(x)
            graph.replay()
            return static_out

        return replay

    def forward(self, x, keep_input: bool = False):
        """The model's output for one batch x, as `bind`'s calls run it (perfmodel run's batches): eager,
        or with CUDA graphs the replay of the graph of x's shape, captured on its first batch (the
        warm-up, as the profile measured it). The output of a replay is overwritten by the next one.
        keep_input: x is never written by the caller, so it can be the graph's static input (no copy)."""
        if not self.options.cuda_graphs:
            return self.model(x)
        key = tuple(x.shape)
        replay = self._graphs.get(key)
        if replay is None:
            replay = self._graphs[key] = self._capture(x if keep_input else x.clone())
        return replay(x)

    def reset_peak(self) -> None:
        if self.is_cuda:
            self.torch.cuda.reset_peak_memory_stats(self.device)
        else:
            memory.reset_peak_rss()

    def peak_memory_mb(self) -> float:
        """Peak memory since reset_peak, model weights included (MiB)."""
        if self.is_cuda:
            return self.torch.cuda.max_memory_allocated(self.device) / 2**20
        return max(0.0, memory.peak_rss_mb() - self.baseline_rss_mb)

    def device_memory_mb(self) -> float | None:
        """What the device may hold for this process: its memory, or the cap it was given; None on a CPU."""
        if not self.is_cuda:
            return None
        torch = self.torch
        total = torch.cuda.get_device_properties(self.device).total_memory / 2**20
        return total * torch.cuda.get_per_process_memory_fraction(self.device)

    def used_memory_mb(self) -> float:
        if self.is_cuda:
            return self.torch.cuda.memory_allocated(self.device) / 2**20
        return max(0.0, memory.rss_mb() - self.baseline_rss_mb)

    def release(self) -> None:
        """Free what a failed or finished point left behind (after an OOM, before the next point)."""
        gc.collect()
        if self.is_cuda:
            self.torch.cuda.empty_cache()
