"""A key written twice in any YAML augcse reads is refused in one line, where YAML would keep the last."""

from __future__ import annotations

from pathlib import Path

import pytest

from augcse.core import yamlfile
from augcse.core.schema import RecipeError
from augcse.studies.study import GridError, load_grid
from augcse.training.recipes.config import load_recipe


def test_the_loader_names_both_lines_and_keeps_merge_keys() -> None:
    with pytest.raises(yamlfile.DuplicateKeyError, match=r"^line 3: key 'name' is written twice in one mapping "
                                                        r"\(first on line 2\); YAML would keep only the last"):
        yamlfile.load("loss:\n  name: simcse\n  name: ct\n")
    assert yamlfile.load("base: &b {a: 1}\nmore:\n  <<: *b\n  a: 2\n") == {"base": {"a": 1}, "more": {"a": 2}}
    assert yamlfile.load("a: {x: 1}\nb: {x: 1}\n") == {"a": {"x": 1}, "b": {"x": 1}}  # equal keys in two mappings


def test_a_recipe_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: dup\nloss: {name: simcse, name: ct}\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(str(recipe))
    assert str(info.value) == (f"recipe {recipe} is not valid YAML: line 2: key 'name' is written twice in one "
                               "mapping (first on line 2); YAML would keep only the last: remove one")


def test_an_override_with_a_duplicate_key_is_refused() -> None:
    with pytest.raises(RecipeError, match="key 'eps' is written twice"):
        load_recipe(None, "quickstart", ["loss.params={eps: 1, eps: 2}"])


def test_a_grid_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    grid = tmp_path / "g.yaml"
    grid.write_text("seeds: [1]\nrecipe: quickstart\ntasks: STSBenchmark\nrows: {a: {}}\nrows: {b: {}}\n")
    with pytest.raises(GridError, match=rf"^grid {grid}: line 5: key 'rows' is written twice .*first on line 4"):
        load_grid(grid)
