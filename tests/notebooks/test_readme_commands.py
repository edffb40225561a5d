"""Every command in the README runs as written, so the examples cannot drift from the code.

Shell lines run from the project root in quick mode and write into a temporary folder: `--mode full` becomes
`--mode quick`, papermill gets `-p MODE quick`, `helpers execute` gets `--book-dir`, and `out.ipynb` goes to the
temporary folder. The example scheduler address `tcp://10.0.0.5:8786` is replaced by the address of a real Dask
LocalCluster, and the placeholder `my_sweep.py` by a small script that calls `run_sweep`. `make` lines are checked
with `make -n` (running `make test` inside the tests would recurse). Python blocks run as they are.
"""

import os
import re
import shlex
import subprocess
import sys
import textwrap

import pytest

from helpers import paths

README = paths.ROOT / "README.md"
EXAMPLE_SCHEDULER = "tcp://10.0.0.5:8786"


def fenced_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), flags=re.M | re.S)


def shell_lines() -> list[str]:
    lines = []
    for block in fenced_blocks("bash"):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command:
                lines.append(command)
    return lines


def test_the_readme_has_the_commands_this_test_expects():
    lines = shell_lines()
    assert "make book" in lines and "make test" in lines
    assert any("papermill" in line for line in lines) and any("helpers execute" in line for line in lines)
    assert fenced_blocks("python"), "the README's Python example disappeared"


@pytest.mark.parametrize("line", [line for line in shell_lines() if line.startswith("make ")])
def test_make_lines_name_real_targets(line):
    result = subprocess.run(["make", "-n", *shlex.split(line)[1:]], cwd=paths.ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def quick(argv: list[str], tmp_path) -> list[str]:
    """The command with its outputs redirected into tmp_path and full mode turned into quick mode."""
    argv = ["quick" if word == "full" and i and argv[i - 1] == "--mode" else word for i, word in enumerate(argv)]
    argv = [str(tmp_path / word) if word.endswith(".ipynb") and not word.startswith("nbs/") else word for word in argv]
    if argv[0].endswith("papermill") and "MODE" not in argv:
        argv += ["-p", "MODE", "quick"]
    if argv[1:4] == ["-m", "helpers", "execute"]:
        argv += ["--book-dir", str(tmp_path / "book"), "--force"]
    return argv


@pytest.fixture(scope="module")
def dask_address():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("line", [line for line in shell_lines() if line.startswith((".venv/", "HELPERS_"))])
def test_shell_example_runs(line, tmp_path, request):
    env = {**os.environ, "BOOK_METRICS_DIR": str(tmp_path / "metrics"), "HELPERS_CACHE_DIR": str(tmp_path / "cache")}
    words = shlex.split(line)
    while "=" in words[0]:                                     # leading VAR=value assignments
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if EXAMPLE_SCHEDULER in line:
        address = request.getfixturevalue("dask_address")
        words = [address if w == EXAMPLE_SCHEDULER else w for w in words]
        env = {k: address if v == EXAMPLE_SCHEDULER else v for k, v in env.items()}
    if "my_sweep.py" in words:
        script = tmp_path / "my_sweep.py"
        script.write_text(textwrap.dedent("""
            from helpers import rank, seeding
            from helpers.experiments import grid, run_sweep
            import torch

            def point(n, seed):
                logits = torch.randn(n, n, generator=seeding.torch_generator(seed))
                return {"hardmax": int(rank.hardmax_rank(logits))}

            df = run_sweep("readme_sweep", point, grid(n=[8, 16]), seeds=[0, 1])
            assert len(df) == 4 and df.attrs["computed"] == 4, df.attrs
        """))
        words = [str(script) if w == "my_sweep.py" else w for w in words]
    words[0] = str(paths.ROOT / words[0]) if words[0].startswith(".venv/") else words[0]
    result = subprocess.run(quick(words, tmp_path), cwd=paths.ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("block", fenced_blocks("python"))
def test_python_example_runs(block, tmp_path):
    env = {**os.environ, "HELPERS_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
