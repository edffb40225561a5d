"""Chapter 05's real stacks trained with stopped models dropped (`helpers.training.train(compact=True)`) against kept
(`compact=False`), alternated in one process: CPU seconds per stack and their ratio.

Each stack is one (task, n, d_qk) cell of chapter 05's full mode (d_model 32, value width 16, 3 seeds, at most
2,000 steps, the chapter's stopping rule), trained with one thread. Usage (cells as task:n:d_qk):

    python benchmarks/bench_stack_compaction.py copy:64:4 reversal:32:4 high_rank:64:8
"""

import sys
import time

import torch

from helpers.experiments import ch05_training as training

RECIPE = training.CellSpec(d_model=32, d_value=16, steps=2000, eval_every=50, patience=6, tolerance=0.005)


def run(task, n, d_qk, compact):
    data = training.task_data(task, n, 0, RECIPE)
    start = time.process_time()
    _, status = training._train_stack(task, data, [(d_qk, s) for s in (0, 1, 2)], RECIPE, compact=compact)
    return time.process_time() - start, status


def main(cells):
    torch.set_num_threads(1)
    totals = {True: 0.0, False: 0.0}
    for cell in cells:
        task, n, d_qk = cell.split(":")
        for compact in (False, True):  # alternated, one process
            seconds, status = run(task, int(n), int(d_qk), compact)
            totals[compact] += seconds
            print(f"{cell:>18} compact={compact!s:5} cpu {seconds:6.1f} s  stop steps {status.stop_step.tolist()}"
                  f"  accuracy {[round(a, 3) for a in status.test_accuracy]}", flush=True)
    print(f"total cpu: kept {totals[False]:.1f} s, dropped {totals[True]:.1f} s, "
          f"ratio {totals[False] / totals[True]:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:] or ["copy:64:4", "reversal:32:4", "high_rank:64:8"])
