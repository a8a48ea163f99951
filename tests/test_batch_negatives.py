"""A loss that contrasts a sentence with the rest of its batch refuses a batch with no rest, before anything loads."""

from __future__ import annotations

import pytest

from augcse.core.schema import RecipeError
from augcse.training.recipes.config import load_recipe

ONE = "training.per_device_train_batch_size=1"


@pytest.mark.parametrize("loss", ["simcse", "vascl", "ct"])
def test_a_batch_of_one_is_refused(loss, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(RecipeError) as info:
        load_recipe(None, "quickstart", [ONE, f"loss.name={loss}", "loss.params={}"])
    assert str(info.value) == (f"recipe key 'training.per_device_train_batch_size': {loss} contrasts each sentence "
                               "with the others of its batch, and a batch of 1 has none, so it would train nothing; "
                               "use 2 or more (the papers use 64-1024)")


def test_processes_that_gather_count_together(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert load_recipe(None, "quickstart", [ONE]).training["per_device_train_batch_size"] == 1
    with pytest.raises(RecipeError, match=r"a batch of 1 \(and 2 processes do not gather across devices\) has none"):
        load_recipe(None, "quickstart", [ONE, "loss.params.gather_across_devices=false"])


def test_a_composite_with_a_contrastive_term_is_refused_and_tsdae_is_not(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(RecipeError, match="composite contrasts each sentence"):
        load_recipe(None, "quickstart", [ONE, "loss.name=composite", "loss.params={terms: [{loss: simcse}]}"])
    recipe = load_recipe(None, "quickstart", [ONE, "loss.name=tsdae", "loss.params={}",
                                              "data.views=[{name: tsdae_noise}]"])
    assert recipe.loss.name == "tsdae"
