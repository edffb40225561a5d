"""Whole-book build budget: a cold `make book` and a warm rebuild after a prose-only change.

    make budget        (or: .venv/bin/python benchmarks/build_budget.py [--mode full|quick])

Builds in a staged copy under _build/budget/ with an empty result store (cold), then appends a sentence to
the intro and rebuilds (warm). Prints both times against the budgets (cold full <= 45 min, warm <= 2 min),
writes them to the staged build's metrics as `_budget.json`, and re-renders its appendix so the build that
was timed shows its own figures. The user's book/ and .cache/ are not touched.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from helpers import book, paths  # noqa: E402

BUDGET_S = {"cold": 45 * 60, "warm": 2 * 60}


def timed(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def make_book(root, mode) -> None:
    failures = book.execute(None, mode, {}, root / "book")
    if failures:
        sys.exit(f"notebooks failed: {', '.join(str(f) for f in failures)}")
    if book.build(root) != 0:
        sys.exit("the strict build failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["quick", "full"], default="full")
    args = parser.parse_args()

    root = paths.BUILD_DIR / "budget"
    shutil.rmtree(root, ignore_errors=True)
    book.stage_sources(root)
    os.environ["BOOK_METRICS_DIR"] = str(root / "book" / "_metrics")
    os.environ["HELPERS_CACHE_DIR"] = str(root / ".cache")

    cold = timed(lambda: make_book(root, args.mode))
    with open(root / "book" / "intro.md", "a") as intro:
        intro.write("\nThis sentence was added by the build-budget benchmark to time a prose-only rebuild.\n")
    warm = timed(lambda: make_book(root, args.mode))

    figures = {
        "mode": args.mode,
        "cold build (s)": round(cold, 1),
        "warm rebuild after a prose change (s)": round(warm, 1),
        "cold budget (s)": BUDGET_S["cold"],
        "warm budget (s)": BUDGET_S["warm"],
        "cold within budget": cold <= BUDGET_S["cold"],
        "warm within budget": warm <= BUDGET_S["warm"],
        "cpu cores": os.cpu_count(),
        "measured at (UTC)": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
    }
    (root / "book" / "_metrics" / "_budget.json").write_text(json.dumps(figures, indent=2))
    book.execute(["99_reproducibility"], args.mode, {}, root / "book", force=True)
    subprocess.run(book.jupyter_book_command() + ["build", str(root), "-W", "-n", "--keep-going", "-q"], check=True)

    print(f"cold {args.mode} build: {cold / 60:.1f} min (budget {BUDGET_S['cold'] / 60:.0f} min) "
          f"-> {'OK' if figures['cold within budget'] else 'OVER BUDGET'}")
    print(f"warm rebuild after a prose-only change: {warm:.0f} s (budget {BUDGET_S['warm']} s) "
          f"-> {'OK' if figures['warm within budget'] else 'OVER BUDGET'}")
    print(f"the timed build, with these figures in its appendix: {root / '_build' / 'html' / 'book' / 'intro.html'}")


if __name__ == "__main__":
    main()
