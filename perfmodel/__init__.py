"""perfmodel: how fast a ready-made neural network serves on GPUs, and how to meet a deadline."""

__version__ = "0.1.0"
