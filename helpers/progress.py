"""One progress line per sweep, written by the process that runs the sweep (workers print nothing).

    line = SweepProgress("ch6_real_data", "process pool (2 workers)")
    line.update(done=3, loaded=6, running=2, left=12, bound=True)   # prints a line at most every `every` seconds
    line.close()                                                     # the last line, always

A line reads: `ch6_real_data [process pool (2 workers)]: 3 models trained, 6 loaded, 2 training, at most 12 more;
about 4 min left`. The estimate is the wall time per model trained so far times the models still to come (an upper
bound when `bound`, as in an adaptive sweep, whose later requests depend on results not in yet).
"""

import sys
import time


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class SweepProgress:
    def __init__(self, name: str, where: str, unit: str = "model", enabled: bool = True, every: float = 10.0,
                 stream=None):
        self.name, self.where, self.unit, self.enabled, self.every = name, where, unit, enabled, every
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()
        self.last = -float("inf")
        self.state = dict(done=0, loaded=0, running=0, left=0, bound=False)

    def text(self) -> str:
        s = self.state
        parts = [f"{s['done']} {self.unit}s trained", f"{s['loaded']} loaded"]
        if s["running"]:
            parts.append(f"{s['running']} training")
        if s["left"]:
            parts.append(f"{'at most ' if s['bound'] else ''}{s['left']} more")
        line = f"{self.name} [{self.where}]: " + ", ".join(parts)
        elapsed = time.perf_counter() - self.started
        if s["done"] and (s["running"] or s["left"]):
            eta = elapsed / s["done"] * (s["running"] + s["left"])
            line += f"; about {'at most ' if s['bound'] else ''}{_duration(eta)} left"
        elif not (s["running"] or s["left"]):
            line += f"; done in {_duration(elapsed)}"
        return line

    def update(self, **state) -> None:
        self.state.update(state)
        now = time.perf_counter()
        if self.enabled and now - self.last >= self.every:
            self.last = now
            print(self.text(), file=self.stream, flush=True)

    def close(self) -> None:
        if self.enabled:
            print(self.text(), file=self.stream, flush=True)
