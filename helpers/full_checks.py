"""What the chapters promise of a full build, checked on its metrics files (`book/_metrics`).

`make check-full` runs `tests/full` on the last full build; the same checks run in CI on synthetic metrics
(`tests/unit/test_full_checks.py`), so they cannot rot. Each check takes `{notebook: metrics JSON}` and returns a
list of problems in words (empty when everything holds):

    problems = run_all(ledger.load_all())      # {check name: [problem, ...]}

The checks re-read the recorded numbers independently of the chapter code: quality bars against the trivial
baselines, seed counts, saturation widths that are trained widths (never interpolated), and robust verdicts that
say "untestable" whenever a perturbation flipped them.
"""

MIN_SEEDS = 3
FULL_CHAPTERS = ("05_trained_synthetic", "06_real_data", "07_model_reduction")


def _values(metrics: dict, notebook: str) -> dict:
    return metrics[notebook]["values"]


def check_modes(metrics: dict) -> list[str]:
    """Every chapter file of the build is a full-mode run, and the trained chapters are there."""
    problems = [f"{nb} is missing from the build" for nb in FULL_CHAPTERS if nb not in metrics]
    problems += [f"{nb} ran in mode {m.get('mode')!r}, not 'full'" for nb, m in metrics.items()
                 if "mode" in m and m["mode"] != "full"]
    return problems


def _robust_verdict_problems(name: str, verdict: dict, seeds: int) -> list[str]:
    """A decided verdict names its robustness check (at least one perturbation per seed) and has no flip; a flipped
    one reads 'untestable'."""
    outcome = verdict.get("outcome", verdict.get("answer"))
    check = verdict.get("robustness") or verdict.get("evidence", {}).get("robustness")
    if outcome == "untestable":
        return []
    if not check:
        return [f"{name}: decided ({outcome}) without a robustness check"]
    problems = []
    if check["flips"]:
        problems.append(f"{name}: decided ({outcome}) although {check['flips'][0]['perturbation']} flips it")
    if check["perturbations"] < seeds:
        problems.append(f"{name}: only {check['perturbations']} perturbations for {seeds} seeds")
    return problems


def check_trained_synthetic(metrics: dict) -> list[str]:
    """Chapter 05: usable cells meet their bar with every seed at the largest width; saturation widths are trained
    widths; every growth verdict is robust or untestable; every model is counted as stopped by its rule or capped."""
    v = _values(metrics, "05_trained_synthetic")
    problems = []
    models = v["models"]
    if v["ch5_converged"] + v["ch5_not_converged"] != len(models):
        problems.append("chapter 05: models stopped by the rule and at the cap do not add up to all models")
    for cell in v["cells"]:
        key = f"chapter 05 {cell['task']} at n = {cell['n']}"
        rows = [m for m in models if m["task"] == cell["task"] and m["n"] == cell["n"]]
        seeds = {m["model_seed"] for m in rows}
        if cell["usable"]:
            top = [m for m in rows if m["d_qk"] == cell["top_d_qk"]]
            if len(top) < MIN_SEEDS or any(m["test_accuracy"] < cell["bar"] for m in top):
                problems.append(f"{key}: used, but not every model at d_qk = {cell['top_d_qk']} meets the bar")
            if len(seeds) < MIN_SEEDS:
                problems.append(f"{key}: used with {len(seeds)} seeds")
            if cell["d_star"] not in cell["d_qk_trained"]:
                problems.append(f"{key}: saturation width {cell['d_star']} was never trained (interpolated?)")
            if not cell["d_star_low"] <= cell["d_star"] <= cell["d_star_high"]:
                problems.append(f"{key}: the saturation width lies outside its interval")
            if cell["d_star_low"] == cell["d_star_high"] and cell["d_star_lowest"] != cell["d_star"]:
                problems.append(f"{key}: an interval of zero width around an untrained gap")
            # an interval with coinciding ends is shown as the seeds that give the width alone, never as one value
            if not cell["spread"] and cell["seed_count"] < MIN_SEEDS:
                problems.append(f"{key}: its interval has one value, and only {cell['seed_count']} seeds are "
                                "counted in its place")
            if cell["spread"] and cell["d_star_low"] == cell["d_star_high"]:
                problems.append(f"{key}: an interval of one value shown as an interval")
    for task, verdict in v["verdicts"].items():
        problems += _robust_verdict_problems(f"chapter 05 {task}", verdict, MIN_SEEDS)
    # the held-out test of the forms and the scalable-softmax comparison are robust verdicts too
    for name in sorted(k for k, value in v.items() if isinstance(value, dict) and "outcome" in value
                       and (k.endswith("_heldout") or k.startswith("ch5_ssmax_"))):
        problems += _robust_verdict_problems(f"chapter 05 {name}", v[name], MIN_SEEDS)
    for row in v.get("heldout", []):   # each fitted width spans its unit step, so no prediction is one value
        if not row["predicted_high"] > row["predicted_low"]:
            problems.append(f"chapter 05 {row['task']} held out at n = {row['n']}: the {row['form']} prediction's "
                            "interval has zero width")
    return problems


def check_real_data(metrics: dict) -> list[str]:
    """Chapter 06: included settings meet their bar and beat the trivial baseline of their data with at least
    MIN_SEEDS valid seeds; saturation points and intervals are trained widths; together verdicts are robust."""
    v = _values(metrics, "06_real_data")
    problems = []
    base = {b["domain"]: b for b in v["baselines"]}
    for q in v["quality"]:
        key = f"chapter 06 {q['domain']} at n = {q['n']}"
        if not q["included"]:
            continue
        if q["fewest_valid_seeds"] < MIN_SEEDS:
            problems.append(f"{key}: included with {q['fewest_valid_seeds']} valid seeds")
        b = base.get(q["domain"])
        if b is None:
            problems.append(f"{key}: no trivial baseline recorded")
        elif (b["metric"] == "bits_per_token" and not q["value"] < b["value"]) or \
                (b["metric"] == "test_accuracy" and not q["value"] > b["value"]):
            problems.append(f"{key}: included, but {q['value']:.3g} does not beat the baseline {b['value']:.3g}")
    for s in v["saturation"]:
        for column in ("value", "low", "high"):
            x = s[column]
            if x is not None and x == x and x not in s["grid"]:
                problems.append(f"chapter 06 {s['domain']} at n = {s['n']}: {s['quantity']} {column} {x} is not a "
                                "trained width")
    for key in ("ch6_together_hardmax", "ch6_together_numerical"):
        problems += _robust_verdict_problems(f"chapter 06 {key}", v[key], MIN_SEEDS)
    return problems


def check_model_reduction(metrics: dict) -> list[str]:
    """Chapter 07: the growth verdict is robust or untestable, and is untestable when a smallest r is the full
    width or fewer than 3 n are fitted."""
    v = _values(metrics, "07_model_reduction")
    fit, verdict = v["scaling_fit"], v["ch7_scaling"]
    problems = _robust_verdict_problems("chapter 07 growth", verdict, MIN_SEEDS) if fit.get("forms") else []
    d_max = v["ch7_d_max"]
    if verdict["outcome"] != "untestable" and (len(set(fit["n"])) < 3 or any(r >= d_max for r in fit["smallest_r"])):
        problems.append("chapter 07 growth: decided on fewer than 3 n or on a censored full-width r")
    return problems


CHECKS = {"modes": check_modes, "05": check_trained_synthetic, "06": check_real_data, "07": check_model_reduction}


def run_all(metrics: dict) -> dict:
    """{check name: [problems]} for every check whose chapter is in `metrics` ("modes" always runs)."""
    out = {"modes": check_modes(metrics)}
    for name, check in CHECKS.items():
        if name != "modes" and any(nb.startswith(name) for nb in metrics):
            try:
                out[name] = check(metrics)
            except (KeyError, TypeError) as err:   # a renamed metric: a problem to report, not a crash
                out[name] = [f"chapter {name}: metrics layout changed ({type(err).__name__}: {err})"]
    return out
