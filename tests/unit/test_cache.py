"""helpers.cache: keys cover config, seed, code and versions; atomic writes; damaged entries are recomputed."""

import dataclasses
import json
import shutil

import pytest

from helpers import cache
from helpers.cache import ResultStore, cache_key, source_hash, write_json_atomic
from helpers.experiments import grid, run_sweep


def test_key_changes_with_config_seed_and_experiment():
    base = cache_key("exp", {"n": 8, "d_head": 2}, 0)
    assert base == cache_key("exp", {"d_head": 2, "n": 8}, 0)  # key order does not matter
    assert base != cache_key("exp", {"n": 8, "d_head": 3}, 0)
    assert base != cache_key("exp", {"n": 8, "d_head": 2, "pos": "rope"}, 0)
    assert base != cache_key("exp", {"n": 8, "d_head": 2}, 1)
    assert base != cache_key("other", {"n": 8, "d_head": 2}, 0)


def test_key_changes_with_helpers_source_and_versions(monkeypatch, tmp_path):
    package = tmp_path / "helpers"
    shutil.copytree(cache.Path(cache.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = source_hash(package)
    assert before == source_hash(package.resolve().parent / "helpers" / ".")  # stable
    (package / "rank.py").write_text((package / "rank.py").read_text() + "\n# a change\n")
    source_hash.cache_clear()
    assert source_hash(package) != before
    source_hash.cache_clear()

    key = cache_key("exp", {"n": 8}, 0)
    monkeypatch.setattr(cache, "code_hash", lambda module=None: "another version of helpers")
    assert cache_key("exp", {"n": 8}, 0) != key
    monkeypatch.undo()
    monkeypatch.setattr(cache.torch, "__version__", "0.0.1")
    assert cache_key("exp", {"n": 8}, 0) != key


def copy_of_helpers(tmp_path):
    package = tmp_path / "helpers"
    shutil.copytree(cache.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def edit(path):
    path.write_text(path.read_text() + "\n# a change\n")
    cache.source_hash.cache_clear()
    cache.code_hash.cache_clear()
    cache.dependency_files.cache_clear()


def test_dependency_files_follow_the_imports_of_a_chapter_module():
    names = {str(p.relative_to(cache.PACKAGE)) for p in cache.dependency_files("helpers.experiments.ch02_low_rank_barrier")}
    # barrier.py: `from .. import attention, geometry, rank, seeding`; the runner and the store always count
    assert {"experiments/ch02_low_rank_barrier.py", "attention.py", "geometry.py", "rank.py", "seeding.py",
            "experiments/__init__.py", "__init__.py", "cache.py"} <= names
    assert not {"plotting.py", "record.py", "book.py", "models.py", "forward.py", "training/loop.py"} & names
    assert cache.dependency_files("tests.unit.test_cache") is None


def test_trained_models_are_not_keyed_by_the_search_that_asked_for_them():
    # an edit of the adaptive design or its engine must not retrain the models already stored
    for points in ("helpers.experiments.ch06_real_data_points", "helpers.experiments.ch05_training"):
        names = {str(p.relative_to(cache.PACKAGE)) for p in cache.dependency_files(points)}
        assert "training/loop.py" in names
        assert not {"design.py", "experiments/adaptive.py", "gridsearch.py"} & names


def test_code_hash_changes_with_a_dependency_and_not_with_unrelated_code(tmp_path):
    package = copy_of_helpers(tmp_path)
    module = "helpers.experiments.ch02_low_rank_barrier"
    before, everything = cache.code_hash(module, package), cache.source_hash(package)
    edit(package / "plotting.py")
    assert cache.code_hash(module, package) == before, "a plotting change must leave the chapter's sweeps warm"
    assert cache.source_hash(package) != everything
    edit(package / "rank.py")
    assert cache.code_hash(module, package) != before, "a change to rank.py must recompute the chapter"
    before = cache.code_hash(module, package)
    edit(package / "experiments" / "__init__.py")
    assert cache.code_hash(module, package) != before, "the sweep runner shapes every stored result"
    assert cache.code_hash("not_helpers", package) == cache.source_hash(package)  # unknown code: hash everything


def point_in_this_file(n, seed):
    return {"value": n + seed}


def test_run_sweep_keys_points_by_the_code_of_their_module(tmp_path):
    import functools

    from helpers.experiments import ch04_random_attention_points

    assert cache.point_module(functools.partial(ch04_random_attention_points.rank_point, trials=1)) == "helpers.experiments.ch04_random_attention_points"
    store = ResultStore(tmp_path)
    run_sweep("probe", point_in_this_file, grid(n=[1]), [0], store=store, progress=False)
    entry = json.loads(next((tmp_path / "probe").glob("*.json")).read_text())
    assert entry["helpers_source"] == cache.source_hash()  # defined outside helpers: every file counts
    run_sweep("probe_init", ch04_random_attention_points.rank_point, grid(n=[8], d_head=[2], d_model=[8], inputs=["gaussian"], trials=[1]),
              [0], store=store, progress=False)
    entry = json.loads(next((tmp_path / "probe_init").glob("*.json")).read_text())
    assert entry["helpers_source"] == cache.code_hash("helpers.experiments.ch04_random_attention_points") != cache.source_hash()


def test_dataclass_configs_are_keyed_by_value():
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        n: int
        tags: tuple = ()

    assert cache_key("e", {"m": Cfg(3)}, 0) == cache_key("e", {"m": {"n": 3, "tags": []}}, 0)
    assert cache_key("e", {"m": Cfg(3)}, 0) != cache_key("e", {"m": Cfg(4)}, 0)


def test_atomic_write_and_safe_format(tmp_path):
    path = write_json_atomic(tmp_path / "a" / "b.json", {"x": [1, 2]})
    assert json.loads(path.read_text()) == {"x": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]  # no temporary file left
    with pytest.raises(ValueError):
        write_json_atomic(tmp_path / "a" / "b.json", {"x": float("nan")})  # NaN is not JSON
    assert json.loads(path.read_text()) == {"x": [1, 2]}  # the old file survives a failed write
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]


def test_store_roundtrip_damage_and_names(tmp_path):
    store = ResultStore(tmp_path)
    assert store.load("exp", {"n": 1}, 0) is None
    path = store.save("exp", {"n": 1}, 0, [{"value": float("nan"), "rank": 3}])
    assert store.load("exp", {"n": 1}, 0) == [{"value": None, "rank": 3}]
    record = json.loads(path.read_text())
    assert record["helpers_source"] == source_hash() and record["config"] == {"n": 1}
    path.write_text('{"result": [')  # a damaged entry counts as missing
    assert store.load("exp", {"n": 1}, 0) is None
    with pytest.raises(ValueError, match="experiment name"):
        store.save("../escape", {}, 0, [])


def point(n, d, seed):
    return {"value": n * d + seed}


def test_run_sweep_uses_the_store(tmp_path):
    store = ResultStore(tmp_path)
    configs = grid(n=[1, 2], d=[3, 4])
    first = run_sweep("toy", point, configs, seeds=[0, 1], store=store, progress=False)
    assert len(first) == 8 and first.attrs == {"computed": 8, "loaded": 0}
    assert list(first.columns) == ["n", "d", "seed", "value"]
    again = run_sweep("toy", point, configs, seeds=[0, 1], store=store, progress=False)
    assert again.attrs == {"computed": 0, "loaded": 8} and again.equals(first)
    more = run_sweep("toy", point, configs + [{"n": 5, "d": 5}], seeds=[0, 1], store=store, progress=False)
    assert more.attrs == {"computed": 2, "loaded": 8}
    redo = run_sweep("toy", point, configs, seeds=[0], store=store, progress=False, recompute=True)
    assert redo.attrs["computed"] == 4


@pytest.mark.parametrize("args,error", [
    (([], [0]), ValueError), (([{"n": 1, "d": 1}], []), ValueError), (([{"n": 1, "seed": 2}], [0]), ValueError),
    (([{"n": 1, "d": 1}], [-1]), ValueError), ((["n=1"], [0]), TypeError),
])
def test_run_sweep_rejects_bad_input(tmp_path, args, error):
    with pytest.raises(error):
        run_sweep("toy", point, *args, store=ResultStore(tmp_path), progress=False)


def test_point_must_return_rows(tmp_path):
    with pytest.raises(TypeError, match="dict or a list of dicts"):
        run_sweep("toy", lambda seed: 3.0, [{}], [0], store=ResultStore(tmp_path), progress=False)
