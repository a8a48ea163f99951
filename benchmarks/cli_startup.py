"""Wall time of the commands a user types first: ``augcse --version``, ``--help``, ``train --help``, and of
refusing a bad recipe value (``augcse train --recipe quickstart loss.params.temperature=-1``, exit 2).

Each command runs ``--repeat`` times in a fresh process; the median, min and max are printed. The target is
under a second for the first ones (``tests/test_cli_surface.py`` checks the mechanism: these commands import
no heavy module) and under 3 s for a refusal (``tests/test_schema.py``: a refusal imports no torch).

    python benchmarks/cli_startup.py --repeat 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = (["--version"], ["--help"], ["train", "--help"], ["eval", "--help"], ["eval", "--list"])
# refused with exit 2 before any model loads
REFUSALS = tuple(["train", "--recipe", "quickstart", bad] for bad in (
    "loss.params.temperature=-1", "loss.params.temperature=.nan", "loss.params.temperature=.inf",
    "training.learning_rate=-1", "data.limit=0", "loss.params.head=mpl", "data.views=[{name: sda, proportoin: 1}]"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    exe = shutil.which("augcse")
    base = [exe] if exe else [sys.executable, "-m", "augcse"]
    print("| command | median | min | max |\n|---|---:|---:|---:|")
    for argv in (*COMMANDS, *REFUSALS):
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            done = subprocess.run([*base, *argv], capture_output=True)
            times.append(time.perf_counter() - start)
            if done.returncode != (2 if argv in REFUSALS else 0):
                raise SystemExit(f"augcse {' '.join(argv)}: exit {done.returncode}: {done.stderr.decode()[-300:]}")
        print(f"| `augcse {' '.join(argv)}` | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s |")


if __name__ == "__main__":
    main()
