"""Wall time of the commands a user types first: ``augcse --version``, ``--help``, ``train --help``.

Each command runs ``--repeat`` times in a fresh process; the median, min and max are printed. The target is
under a second (``tests/test_cli_surface.py`` checks the mechanism: these commands import no heavy module).

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    exe = shutil.which("augcse")
    base = [exe] if exe else [sys.executable, "-m", "augcse.cli"]
    print("| command | median | min | max |\n|---|---:|---:|---:|")
    for argv in COMMANDS:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run([*base, *argv], capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        print(f"| `augcse {' '.join(argv)}` | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s |")


if __name__ == "__main__":
    main()
