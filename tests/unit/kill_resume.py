"""A sweep script started, killed with SIGKILL once enough of its points are stored, and resumed (shared by the
resume tests of `run_sweep` and of the adaptive engine)."""

import os
import signal
import subprocess
import sys
import time


def kill_when_stored(script, args: list[str], env: dict, stored, enough: int, timeout: float = 120) -> set:
    """Run `script args` with `env` until `stored()` (the points in the store) has `enough` entries, then SIGKILL it;
    returns what was stored. Fails if the script exits first."""
    proc = subprocess.Popen([sys.executable, str(script), *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(stored()) < enough:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()                      # waits and closes the pipes (an unclosed pipe is a ResourceWarning)
    assert proc.returncode == -signal.SIGKILL
    return stored()


def environment(cache_dir) -> dict:
    return {**os.environ, "HELPERS_CACHE_DIR": str(cache_dir), "PYTHONPATH": os.getcwd()}
