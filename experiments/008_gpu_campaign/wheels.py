"""Download the wheels the GPU machine lacks into .whl/ (it has no network), and check they fit a call.

The device image has Python 3.12, torch 2.11 (CUDA) with torchvision, numpy 2, pandas 3, scikit-learn,
rich, psutil, nvidia-ml-py, matplotlib, pytest and hypothesis. perfmodel needs besides: pyomo and highspy
(the planner), and ray (`perfmodel run`) with jsonschema and its three dependencies. A call carries at most
64 MiB (working tree included); Ray's wheel alone is 76 MiB, 31 MiB of it the Java workers' jar
(ray/jars/ray_dist.jar), which Python-only Ray never loads: the wheel is re-packed without it.

    python3 experiments/008_gpu_campaign/wheels.py            # into .whl/, for cp312 (the GPU machine)
    python3 experiments/008_gpu_campaign/wheels.py --python 3.11 --dest /tmp/w   # the same for this machine

Only the session's first call carries them (device_call.sh installs them into the warm machine's /tmp/site
for the next calls); that call must hold the working tree and the wheels within LIMIT_MIB, less MARGIN_MIB
(tests/experiments/test_campaign.py checks the tree against WHEELS_MIB, so a growing tree is caught in CI).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELS = (
    "pyomo==6.10.1",
    "highspy==1.15.1",
    "ray==2.60.0",
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
# Java workers, the dashboard's web client, and libraries on top of Ray that `perfmodel run` never imports
# (checked: ray.init, an actor and `perfmodel run` ran without them).
DROP = ("ray/jars/", "ray/dashboard/client/", "ray/rllib/", "ray/serve/", "ray/llm/", "ray/data/")
LIMIT_MIB = 64
WHEELS_MIB = 48.1  # the seven wheels above as this script leaves them (measured 2026-11-27, Ray slimmed: 38.3)
# The device counts more than tree_bytes() does: it refused 63.6 MiB by this count as over 64 (README.md).
MARGIN_MIB = 2.0


def download(spec: str, dest: Path, python: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "-d",
        str(dest),
        spec,
    ]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd, check=True)


def slim(wheel: Path) -> None:
    """Re-pack a wheel without the files under DROP, its RECORD rewritten to match."""
    out = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        kept = [i for i in src.infolist() if not i.filename.startswith(DROP) and i.filename != record_name]
        if len(kept) == len(src.infolist()) - 1:
            out.unlink()
            return  # nothing to drop (already slim)
        record = []
        for info in kept:
            data = src.read(info)
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{info.filename},sha256={digest},{len(data)}")
        record.append(f"{record_name},,")
        dst.writestr(record_name, "\n".join(record) + "\n")
    out.replace(wheel)


def tree_bytes() -> int:
    """What travels besides the wheels: tracked and untracked-not-ignored files."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    return sum((ROOT / n.decode()).stat().st_size for n in names if n and (ROOT / n.decode()).is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default="3.12", help="the target's Python version (default 3.12)")
    parser.add_argument("--dest", type=Path, default=ROOT / ".whl", help="folder for the wheels (default .whl)")
    args = parser.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    for spec in WHEELS:
        name = spec.split("==")[0].replace("-", "_").lower()
        found = [w for w in args.dest.glob("*.whl") if w.name.lower().startswith(name + "-")]
        if not found:
            download(spec, args.dest, args.python)
            found = [w for w in args.dest.glob("*.whl") if w.name.lower().startswith(name + "-")]
        if name == "ray":
            slim(found[0])
    wheels = sorted(args.dest.glob("*.whl"))
    total = sum(w.stat().st_size for w in wheels)
    for w in wheels:
        print(f"{w.stat().st_size / 2**20:7.1f} MiB  {w.name}")
    tree = tree_bytes()
    print(
        f"{total / 2**20:7.1f} MiB  wheels\n{tree / 2**20:7.1f} MiB  working tree\n"
        f"{(total + tree) / 2**20:7.1f} MiB  in the first call, of {LIMIT_MIB} MiB a call may carry "
        f"({MARGIN_MIB:g} MiB of it kept back)"
    )
    return 0 if total + tree <= (LIMIT_MIB - MARGIN_MIB) * 2**20 else 1


if __name__ == "__main__":
    raise SystemExit(main())
