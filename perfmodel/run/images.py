"""Image files: found in a folder, sorted into the plan's input-size classes, decoded into model input.

A file goes to the class of the smallest planned input size at least as large as its shorter side
(so that no picture is blown up more than needed), or to the largest class when it is larger than
all of them. Decoding: PIL, RGB, the shorter side resized to the input size, the centre cropped to a
square, scaled to [0, 1] and normalised with ImageNet's mean and standard deviation (torchvision's).
16-bit greyscale PNGs are scaled from [0, 65535] (PIL's convert("RGB") would clip them at 255).

Only regular files are read: a FIFO, socket or device named *.png would block its reader forever. The
folder's listing skips them, and every open checks again (without blocking), since the folder may
change between listing and reading.
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_left
from pathlib import Path

import numpy as np

from perfmodel.errors import InputError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)


def find_images(folder) -> tuple[list[str], list[tuple[str, str]]]:
    """Image files under `folder` (recursive, sorted) and the other files found, each with why it is skipped."""
    root = Path(folder)
    if not root.exists():
        raise InputError(f"`images` {folder} does not exist: give a folder with JPEG, PNG or WebP files.")
    if not root.is_dir():
        raise InputError(f"`images` {folder} is a file, not a folder: give the folder that holds the images.")
    images, skipped = [], []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise_unreadable):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.normpath(os.path.join(dirpath, name))  # "./photos/a.jpg" and "photos/a.jpg" resume alike
            if not name.lower().endswith(IMAGE_SUFFIXES):
                skipped.append((path, "not a JPEG, PNG or WebP file"))
            elif (kind := _not_regular(path)) is not None:
                skipped.append((path, kind))
            else:
                images.append(path)
    if not images:
        raise InputError(
            f"the images folder {folder} holds no JPEG, PNG or WebP file"
            + (f" (only {len(skipped)} other file(s))" if skipped else "")
            + "."
        )
    return images, skipped


class NotRegularFile(OSError):
    """An image path that is not a regular file (a FIFO, a socket, a device) or is gone."""


def _not_regular(path: str) -> str | None:
    """Why `path` is not a regular file (following links), or None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    return None if stat.S_ISREG(mode) else f"not a regular file ({_kind(mode)})"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a plain file"


def open_regular(path: str):
    """A binary file object of `path`, opened without blocking (a FIFO would wait for a writer), or
    NotRegularFile when it is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"not a regular file ({_kind(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _raise_unreadable(error: OSError) -> None:
    raise InputError(f"cannot read the folder {error.filename}: {error.strerror}.")


def size_classes(paths: list[str], sizes: list[int]) -> tuple[dict[int, list[str]], list[tuple[str, str]]]:
    """Sort files into input-size classes by their shorter side (read from the header only)."""
    sizes = sorted(sizes)
    classes: dict[int, list[str]] = {s: [] for s in sizes}
    if len(sizes) == 1:
        classes[sizes[0]] = list(paths)
        return classes, []
    from PIL import Image

    skipped = []
    for path in paths:
        try:
            with open_regular(path) as handle, Image.open(handle) as im:
                shorter = min(im.size)
        except Exception as exc:  # PIL raises many kinds for a file that is not an image
            skipped.append((path, reason(exc)))
            continue
        classes[sizes[min(bisect_left(sizes, shorter), len(sizes) - 1)]].append(path)
    return classes, skipped


def decode(path: str, size: int) -> np.ndarray:
    """One file as a normalised float32 array (3, size, size). Raises on a file PIL cannot read."""
    from PIL import Image

    with open_regular(path) as handle, Image.open(handle) as im:
        im.draft("RGB", (size, size))  # JPEG: decode at a reduced scale when the file is much larger
        if im.mode.startswith("I"):  # 16-bit greyscale (PNG): in [0, 1] as floats, not clipped at 255
            im, full = Image.fromarray(np.asarray(im, dtype=np.float32) / 65535.0, "F"), 1.0
        else:
            im, full = im.convert("RGB"), 255.0
        width, height = im.size
        scale = size / min(width, height)
        resized = (max(size, round(width * scale)), max(size, round(height * scale)))
        im = im.resize(resized, Image.BILINEAR)
        left, top = (resized[0] - size) // 2, (resized[1] - size) // 2
        im = im.crop((left, top, left + size, top + size))
        rgb = np.asarray(im, dtype=np.float32) / full
    if rgb.ndim == 2:  # greyscale: the same value in every channel, as convert("RGB") gives
        rgb = np.repeat(rgb[:, :, None], 3, axis=2)
    # Channel-first in memory too, not a transposed view: a stack of views is channels-last in memory,
    # which the CPU runs up to 20% faster than the layout the profile measured (EfficientNet-B0 here).
    return np.ascontiguousarray((rgb.transpose(2, 0, 1) - MEAN) / STD)


def reason(exc: BaseException) -> str:
    """Why a file could not be read, in a few words."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
