"""What a chapter's `analyse(P)` returns: tidy frames, the numbers the prose quotes, and verdicts as data.

    result = ChapterResult()
    result.frames["curves"] = curves                       # tidy DataFrame, recorded in the metrics file
    result.quote("ch4_d_model", 512, "d")                  # glued as {glue:text}`ch4_d_model`, recorded
    result.quote("ch4_ref_input", "orthonormal")           # text is glued as it is
    result.verdicts["ch4_barrier_unit"] = Verdict("above", "The barrier fails ...", rule="...", evidence={...})

`helpers.record.publish(notebook, P, result)` records and glues all of it in one call. This module is ground
level (it imports only `english`), so chapter modules can build results without depending on
`record` (whose edits would otherwise re-key their cached sweeps).
"""

import math
import time
from dataclasses import dataclass, field

from .english import number


@dataclass(frozen=True)
class Verdict:
    """A conclusion as data: the `outcome` (a short word from the rule's outcomes), the `sentence` the prose
    shows, the `rule` in words, and the `evidence` it rests on (threshold, interval, counts: JSON-able numbers)."""

    outcome: str
    sentence: str
    rule: str
    evidence: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Quote:
    """A value the prose quotes: a number formatted with `fmt` (a Python format spec such as ".3f" or "d") or to
    `digits` significant digits without e-notation (`helpers.english.number`), or text when neither is given."""

    value: object
    fmt: str = ""
    digits: int | None = None

    def text(self) -> str:
        value = self.value.item() if hasattr(self.value, "item") else self.value
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "n/a"
        if self.digits is not None:
            return number(value, self.digits)
        return format(value, self.fmt) if self.fmt else str(value)


@dataclass
class ChapterResult:
    """Everything a chapter computed: `frames` (name -> tidy DataFrame or JSON-able value, recorded), `quotes`
    (glue name -> Quote), `verdicts` (glue name -> Verdict), `seconds` (the time analyse took) and `data` (name -> frames the figures draw that
    are not recorded)."""

    frames: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    quotes: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)
    seconds: float = 0.0
    _started: float = field(default_factory=time.perf_counter, repr=False)

    def quote(self, name: str, value, fmt: str = "", digits: int | None = None) -> None:
        """Quote `value` in the prose under the glue name `name` (each name once); see `Quote` for fmt/digits."""
        if name in self.quotes or name in self.verdicts:
            raise ValueError(f"the glue name {name!r} is quoted twice")
        self.quotes[name] = Quote(value, fmt, digits)

    def verdict(self, name: str, verdict: Verdict) -> Verdict:
        """Add a verdict under the glue name `name`; its sentence is what the prose shows."""
        if name in self.quotes or name in self.verdicts:
            raise ValueError(f"the glue name {name!r} is quoted twice")
        self.verdicts[name] = verdict
        return verdict

    def done(self) -> "ChapterResult":
        """Stop the clock (call at the end of analyse)."""
        self.seconds = time.perf_counter() - self._started
        return self
