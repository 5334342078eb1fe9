"""A stand-in entry point for tests/testbed/test_launch.py, run through launch.launch like a worker:
``main([SECONDS, CODE])`` prints its argv and one environment variable, sleeps, and exits with CODE;
``main(["optimizer"])`` builds and steps an AdamW as a worker's first inner step does and prints how
many modules that imported (the fork server's preload should have them all)."""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> None:
    if argv == ["optimizer"]:
        import torch

        before = set(sys.modules)
        model = torch.nn.Linear(4, 4)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
        new = sorted(set(sys.modules) - before)
        print("new modules", len(new), "dynamo", any(m.startswith("torch._dynamo") for m in new), flush=True)
        return
    print("argv", argv, "sys.argv", sys.argv[1:], "LAUNCH_PROBE", os.environ.get("LAUNCH_PROBE"), flush=True)
    time.sleep(float(argv[0]))
    raise SystemExit(int(argv[1]))
