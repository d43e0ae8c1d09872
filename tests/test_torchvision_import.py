"""perfmodel._torchvision against a torchvision whose compiled extension matches torch, and one whose does not.

Each case runs in a fresh process with a stand-in `torchvision` package of the real one's shape: an
`extension.py` that loads `_C.so` with torch.ops.load_library (a failure to load is not an error), a
`_meta_registrations.py` that registers a fake kernel for `torchvision::nms` (which fails when the
schema is missing), and a `models` module. Its `_C.so` is a small C library built here:

- matching: it defines `torchvision::nms` and `torchvision::qnms`, as the real extension does, and
  aborts when a schema is already defined (the real one's C++ static initializer throws, which
  terminates the process: SIGABRT);
- not matching: it needs a symbol this torch does not have, so it fails to load, as an extension
  built for another torch does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # each test imports in a fresh interpreter
ROOT = Path(__file__).resolve().parents[1]

MATCHING = r"""
#include <stdint.h>
#include <stdlib.h>
typedef int32_t AOTITorchError;
typedef struct TorchLibraryOpaque *TorchLibraryHandle;
extern AOTITorchError aoti_torch_library_init_fragment(const char *, const char *, uint32_t, TorchLibraryHandle *);
extern AOTITorchError aoti_torch_library_def(TorchLibraryHandle, const char *);

__attribute__((constructor)) static void define_ops(void) {
    TorchLibraryHandle lib;
    if (aoti_torch_library_init_fragment("torchvision", __FILE__, __LINE__, &lib) != 0) abort();
    if (aoti_torch_library_def(lib, "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor") != 0) abort();
    if (aoti_torch_library_def(lib, "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor") != 0) abort();
}
"""

NOT_MATCHING = r"""
extern void c10_symbol_of_another_torch_build(void);
__attribute__((constructor)) static void define_ops(void) { c10_symbol_of_another_torch_build(); }
"""

PACKAGE = {
    "__init__.py": "from . import extension, _meta_registrations, models\n",
    "extension.py": """
        import os
        import torch

        def _load_library():
            try:
                torch.ops.load_library(os.path.join(os.path.dirname(__file__), "_C.so"))
                return True
            except (ImportError, OSError):
                return False

        HAS_OPS = _load_library()
    """,
    "_meta_registrations.py": """
        import torch

        @torch.library.register_fake("torchvision::nms")
        def meta_nms(dets, scores, iou_threshold):
            return dets.new_empty(0, dtype=torch.long)
    """,
    "models.py": """
        import torch

        def resnet50(weights=None):
            return torch.nn.Identity()
    """,
}

CHECK = """
import torch
from perfmodel._torchvision import import_torchvision
tv = import_torchvision()
print(type(tv.models.resnet50(weights=None)).__name__, tv.extension.HAS_OPS, torch.ops.torchvision.nms.default._schema)
"""


def _fake_torchvision(tmp_path: Path, source: str) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in extension")
    import torch

    root = tmp_path / "site"
    package = root / "torchvision"
    package.mkdir(parents=True)
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text))
    (tmp_path / "ext.c").write_text(source)
    torch_lib = Path(torch.__file__).parent / "lib"
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-o",
            str(package / "_C.so"),
            str(tmp_path / "ext.c"),
            f"-L{torch_lib}",
            "-ltorch_cpu",
            f"-Wl,-rpath,{torch_lib}",
        ],
        check=True,
        capture_output=True,
    )
    return root


def _import_in_fresh_process(site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=120)


def test_matching_extension_defines_the_ops_and_nothing_aborts(tmp_path):
    done = _import_in_fresh_process(_fake_torchvision(tmp_path, MATCHING))
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split()[:2] == ["Identity", "True"]  # the extension loaded and defined the ops


def test_extension_of_another_torch_build_falls_back_to_our_schemas(tmp_path):
    done = _import_in_fresh_process(_fake_torchvision(tmp_path, NOT_MATCHING))
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split()[:2] == ["Identity", "False"]
    assert "nms(Tensor dets, Tensor scores, float iou_threshold)" in done.stdout
