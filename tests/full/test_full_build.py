"""The full-mode tier: what the chapters promise, checked on the metrics of the last full build (`book/_metrics`).

Run it with `make check-full` after `make book`. Without a full build it is skipped, saying so; the checks
themselves (`helpers.full_checks`) are unit-tested on synthetic metrics in `tests/unit/test_full_checks.py`.
"""

import pytest

from helpers import full_checks, ledger, paths

pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def metrics():
    found = ledger.load_all()
    full = {nb: m for nb, m in found.items() if m.get("mode") == "full"}
    if not any(nb in full for nb in full_checks.FULL_CHAPTERS):
        pytest.skip(f"no full build in {paths.metrics_dir()}: run `make book` (MODE=full) first, then `make check-full`")
    return found


@pytest.mark.parametrize("check", sorted(full_checks.CHECKS))
def test_the_full_build_keeps_its_promises(metrics, check):
    if check != "modes" and not any(nb.startswith(check) for nb in metrics):
        pytest.skip(f"chapter {check} is not in this build")
    problems = full_checks.run_all(metrics)[check]
    assert not problems, "\n".join(problems)
