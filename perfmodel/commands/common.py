"""What every subcommand shares: the exit codes and the help layout."""

from __future__ import annotations

import argparse

EXIT_CODES = """exit codes:
  0    success
  1    a failure while measuring (a worker or server died)
  2    bad input: an argument, a file, a model, a device
  3    no feasible plan (perfmodel plan)
  130  interrupted (Ctrl-C); finished work is kept
  143  terminated (SIGTERM, perfmodel profile); finished work is kept
"""


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)
