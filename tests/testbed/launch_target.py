"""A stand-in entry point for tests/testbed/test_launch.py, run through launch.launch like a worker:
``main([SECONDS, CODE])`` prints its argv and one environment variable, sleeps, and exits with CODE."""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> None:
    print("argv", argv, "sys.argv", sys.argv[1:], "LAUNCH_PROBE", os.environ.get("LAUNCH_PROBE"), flush=True)
    time.sleep(float(argv[0]))
    raise SystemExit(int(argv[1]))
