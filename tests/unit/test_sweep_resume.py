"""A sweep killed with SIGKILL halfway resumes with only the missing points computed."""

import json
import subprocess
import sys
import textwrap
from kill_resume import environment, kill_when_stored

SCRIPT = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from helpers.experiments import grid, run_sweep

    LOG = Path(sys.argv[1])

    def point(n, d, seed):
        with LOG.open("a") as log:
            log.write(f"{n},{d},{seed}\\n")
        time.sleep(float(sys.argv[2]))
        return {"value": n * 10 + d + seed / 10}

    if __name__ == "__main__":
        df = run_sweep("resume_test", point, grid(n=[1, 2, 3, 4], d=[1, 2]), seeds=[0, 1], progress=False)
        print(len(df), df.attrs["computed"], df.attrs["loaded"])
''')
TOTAL = 16


def stored_points(cache_dir):
    folder = cache_dir / "resume_test"
    if not folder.exists():
        return set()
    points = set()
    for path in folder.glob("*.json"):
        record = json.loads(path.read_text())
        points.add((record["config"]["n"], record["config"]["d"], record["seed"]))
    return points


def test_sigkill_halfway_then_resume(tmp_path):
    script = tmp_path / "sweep.py"
    script.write_text(SCRIPT)
    cache_dir, log1, log2 = tmp_path / "cache", tmp_path / "first.log", tmp_path / "second.log"
    env = environment(cache_dir)
    kill_when_stored(script, [str(log1), "0.15"], env, lambda: stored_points(cache_dir), TOTAL // 2)
    done = stored_points(cache_dir)
    assert TOTAL // 2 <= len(done) < TOTAL
    # every stored entry parsed above: a write cut by the kill leaves at most an ignored ".*.tmp" file

    rerun = subprocess.run([sys.executable, str(script), str(log2), "0"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    rows, computed, loaded = map(int, rerun.stdout.split())
    recomputed = {tuple(int(v) for v in line.split(",")) for line in log2.read_text().splitlines()}
    everything = {(n, d, s) for n in (1, 2, 3, 4) for d in (1, 2) for s in (0, 1)}
    assert recomputed == everything - done
    assert (rows, computed, loaded) == (TOTAL, TOTAL - len(done), len(done))
