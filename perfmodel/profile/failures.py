"""What a failed model call means: out of memory, a size limit, a broken CUDA context, or an error.

A GPU does not always say "out of memory" when a batch does not fit. cuDNN and cuBLAS report the
same condition under other names when they cannot get their workspace or handles ("unable to find
an engine", CUBLAS_STATUS_NOT_INITIALIZED, CUDNN_STATUS_INTERNAL_ERROR ...), and kernels that index
with 32 bits refuse tensors past 2^31 elements ("canUse32BitIndexMath"; in some PyTorch versions
max_pool2d says "value cannot be converted to type int without overflow" or "integer out of range"),
which ResNet-50 and EfficientNet-B0 reach at large batches. Each kind is a `Failure`:

- `oom`: out of memory, plainly said;
- `limit`: a kernel's 32-bit size limit; like an OOM, it bounds the largest batch;
- `oom-like`: a failure that means out of memory when a smaller batch of the same point ran (the
  sweep decides, since only it knows);
- `sticky`: the CUDA context is broken (illegal memory access, device-side assert ...): every later
  call in the process fails, so the sweep must stop;
- `error`: anything else.

The message kept is one line with the real cause: the last line of a TorchScript interpreter error
(its first line only says that "an operation failed"), without traceback frames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("oom", "limit", "oom-like", "sticky", "error")

_OOM = (
    "out of memory",
    "can't allocate memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "std::bad_alloc",
)
_LIMIT = (
    "canUse32BitIndexMath",
    "32-bit index",
    "32bit index",
    "must be positive, but got N=-",
    "numel needs to be smaller than int32_t max",
    "exceeds the 32-bit",
    "integer out of range",
)
# A size that overflows an integer type; not a float type: "cannot be converted to type at::Half without
# overflow" is a model's own constant out of fp16's range (a real error, whatever the batch).
_LIMIT_PATTERN = re.compile(r"cannot be converted to type (?:unsigned )?(?:int|long|int32|int64)\w* without overflow")
_OOM_LIKE = (
    "unable to find an engine",
    "CUBLAS_STATUS_NOT_INITIALIZED",
    "CUBLAS_STATUS_INTERNAL_ERROR",
    "CUDNN_STATUS_INTERNAL_ERROR",
    "CUDNN_STATUS_NOT_INITIALIZED",
    "CUDNN_STATUS_NOT_SUPPORTED",
    "CUDNN_STATUS_EXECUTION_FAILED",
    "invalid configuration argument",
    "could not create a primitive",
)  # oneDNN on a CPU, when its scratchpad cannot be allocated
_STICKY = (
    "illegal memory access",
    "device-side assert",
    "misaligned address",
    "illegal instruction",
    "unspecified launch failure",
    "uncorrectable ECC error",
    "context is destroyed",
    "hardware stack error",
    "invalid program counter",
    "launch timed out and was terminated",
    "GPU is lost",
    "CUDA driver is shutting down",
)

_EXCEPTION_LINE = re.compile(r"^(?:builtins\.)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)):\s*(.*)$")


@dataclass(frozen=True)
class Failure:
    kind: str  # one of KINDS
    message: str  # one line: "RuntimeError: CUDA out of memory. Tried to allocate ..."


def describe(exc: BaseException, limit: int = 300) -> str:
    """One line naming the exception and its real cause, with no traceback frames."""
    return cause_line(f"{type(exc).__name__}: {str(exc).strip()}", limit)


def cause_line(text: str, limit: int = 300) -> str:
    """The line of `text` that says what went wrong.

    TorchScript errors put the cause last ("builtins.RuntimeError: ..."), after the script's frames;
    Python tracebacks too. Anything else: the first line.
    """
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    if len(lines) > 1 and ("TorchScript" in lines[0] or lines[0].startswith("Traceback")):
        return (_last_exception(lines) or lines[0])[:limit]
    return lines[0][:limit] if lines else ""


def log_cause(text: str, limit: int = 300) -> str:
    """What a program's output (a log) says went wrong: its last exception line, else its last line."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return (_last_exception(lines) or (lines[-1] if lines else ""))[:limit]


def _last_exception(lines: list[str]) -> str | None:
    for line in reversed(lines):
        match = _EXCEPTION_LINE.match(line)
        if match:
            return f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2)}"
    return None


def classify(exc: BaseException) -> Failure:
    """The kind of a failed call, from the exception's type and its whole text."""
    out_of_memory = isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
    return Failure("oom" if out_of_memory else kind_of_text(f"{type(exc).__name__}: {exc}"), describe(exc))


def kind_of_text(text: str) -> str:
    """The failure kind a message names (see the module's docstring)."""
    for kind, markers in (("sticky", _STICKY), ("oom", _OOM), ("limit", _LIMIT), ("oom-like", _OOM_LIKE)):
        if any(marker.lower() in text.lower() for marker in markers):
            return kind
        if kind == "limit" and _LIMIT_PATTERN.search(text):
            return kind
    return "error"
