"""Rewrites driven by word lists: colours, contractions, discourse markers, gendered words, numbers."""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Mapping

from augcse.text.augment.base import NL_AUGMENTER, Augmentation, Meaning, register
from augcse.text.augment.lexicon import colour_names, discourse_markers, first_names, gender_pairs
from augcse.text.augment.numbers import spell_numbers
from augcse.text.augment.text import Edits, match_case

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc, Token


def _phrase_at(doc: Doc, i: int, phrases: dict[str, object], max_words: int) -> tuple[str, int] | None:
    """The longest phrase of ``phrases`` (lower-case, space-joined) starting at token ``i``."""
    for n in range(min(max_words, len(doc) - i), 0, -1):
        key = " ".join(t.lower_ for t in doc[i:i + n])
        if key in phrases:
            return key, n
    return None


def _replace_phrases(doc: Doc, phrases: Mapping[str, object], max_words: int,
                     pick: Callable[[int, str, int], str | None]) -> str | None:
    """Left to right, put ``pick(i, phrase, n_words)`` in place of each phrase found at token ``i``.

    ``pick`` returns None to leave a phrase alone (the scan then moves on by one token), so the
    colour and discourse-marker rules share one scan and differ only in what fits and what replaces it.
    """
    edits, i = Edits(doc), 0
    while i < len(doc):
        hit = _phrase_at(doc, i, phrases, max_words)
        new = pick(i, *hit) if hit else None
        if new is None:
            i += 1
            continue
        n = hit[1]
        edits.replace_span(i, i + n, match_case(doc[i].text, new))
        i += n
    return edits.render() if edits else None


# --------------------------------------------------------------------------- colours

@register
class ColorTransformation(Augmentation):
    """Replace colour mentions with a random one of the 147 CSS3/W3C extended colour keywords."""

    name = "ColorTransformation"
    meaning = Meaning.POSSIBLY.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; colour keywords from webcolors (CSS3)"
    rule = "each adjective/noun colour mention (one to three words) becomes a different random CSS3 colour"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        def pick(i: int, key: str, n: int) -> str | None:
            if doc[i + n - 1].pos_ not in ("ADJ", "NOUN"):
                return None
            return rng.choice([c for c in colour_names() if c != key])

        return _replace_phrases(doc, _colour_index(), 3, pick)


@lru_cache(maxsize=1)
def _colour_index() -> dict[str, bool]:
    index = {name: True for name in colour_names()}
    index.update({name.replace(" ", ""): True for name in colour_names()})
    return index


# --------------------------------------------------------------------------- contractions

@lru_cache(maxsize=1)
def _contraction_tables() -> tuple[dict[str, str], dict[str, str]]:
    """(contraction -> expansion, expansion -> contraction) from the ``contractions`` package."""
    import contractions

    expand: dict[str, str] = {}
    for short, full in contractions.contractions_dict.items():
        if "'" in short and short.isascii() and full.replace(" ", "").isalpha():
            expand[short.lower()] = full.lower()
    skip = {"ain't", "amn't", "daresn't", "dasn't", "gon't", "he've", "she've", "it've", "let's", "e'er",
            "'cause", "ma'am", "o'clock", "y'all", "y'all'd", "y'all're", "y'all've", "y'all'd've"}
    contract: dict[str, str] = {}
    for short, full in sorted(expand.items(), key=lambda kv: len(kv[0])):
        if short not in skip and full.count(" ") == 1 and full not in contract:
            contract[full] = short
    return expand, contract


@lru_cache(maxsize=2)
def _pattern(keys: tuple[str, ...]) -> re.Pattern:
    alts = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    return re.compile(rf"(?<![\w'])({alts})(?![\w'])", re.IGNORECASE)


@register
class ContractionExpansions(Augmentation):
    """Expand contractions, or contract expansions when there are none ("does not" <-> "doesn't")."""

    name = "ContractionExpansions"
    meaning = Meaning.PRESERVING.value
    source = NL_AUGMENTER + " (Checklist list); contraction table from the `contractions` package"
    rule = "if the sentence has contractions expand them all, else contract every contractible pair of words"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        expand, contract = _contraction_tables()
        norm = text.replace("\u2019", "'")
        pattern = _pattern(tuple(expand))
        if pattern.search(norm):
            return pattern.sub(lambda m: match_case(m.group(0), expand[m.group(0).lower()]), norm)
        pattern = _pattern(tuple(contract))
        if pattern.search(norm):
            return pattern.sub(lambda m: match_case(m.group(0), contract[m.group(0).lower()]), norm)
        return None


# --------------------------------------------------------------------------- discourse markers

CLAUSE_INITIAL_DEPS = {"advmod", "mark", "cc", "prep", "npadvmod", "conj"}


@register
class DiscourseMarkerSubstitution(Augmentation):
    """Replace a discourse marker with another of the same PDTB sense class and slot."""

    name = "DiscourseMarkerSubstitution"
    meaning = Meaning.PRESERVING.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; Pitler et al. (2008), PDTB 2.0 (wordlists/discourse_markers.tsv)"
    rule = ("markers of the same sense class and syntactic slot are interchangeable; adverbials only at a "
            "clause start (sentence start or after , ; :)")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        by_marker, by_class = discourse_markers()

        def pick(i: int, key: str, n: int) -> str | None:
            if not self._fits(doc, i, key, by_marker[key]):
                return None
            return rng.choice([m for m in by_class[by_marker[key]] if m != key])

        return _replace_phrases(doc, by_marker, 4, pick)

    @staticmethod
    def _fits(doc: Doc, i: int, marker: str, cls: str) -> bool:
        tok = doc[i]
        if cls.endswith(".cc"):
            return tok.dep_ == "cc"
        if cls.endswith(".sub"):
            return tok.dep_ == "mark"
        at_clause_start = i == 0 or doc[i - 1].text in (",", ";", ":", "--")
        return at_clause_start and (" " in marker or tok.dep_ in CLAUSE_INITIAL_DEPS)


# --------------------------------------------------------------------------- gender

PRONOUNS = {"he": "she", "she": "he", "him": "her", "his": "her", "himself": "herself", "herself": "himself",
            "hers": "his"}


def _swap_pronoun(tok: Token) -> str | None:
    word = tok.lower_
    if word == "her":  # object "him" or possessive "his"
        return "his" if tok.tag_ == "PRP$" or tok.dep_ == "poss" else "him"
    if word == "his" and tok.tag_ != "PRP$" and tok.dep_ != "poss":
        return "hers"
    return PRONOUNS.get(word)


@register
class GenderSwap(Augmentation):
    """Swap gendered words, pronouns and common first names for their other-gender counterparts."""

    name = "GenderSwap"
    meaning = Meaning.PRESERVING.value
    needs = ("parse",)
    source = (NL_AUGMENTER + "; word pairs after Lu et al. (2020) in wordlists/gender_pairs.tsv; first names "
              "from gender-guesser")
    rule = "pronouns by grammatical role, gendered nouns by pair list, a PERSON's first name by a random name of the other gender"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        pairs, names = gender_pairs(), first_names()
        male, female = set(names["male"]), set(names["female"])
        edits = Edits(doc)
        for tok in doc:
            new = None
            if tok.pos_ == "PRON":
                new = _swap_pronoun(tok)
            elif tok.ent_type_ == "PERSON" and tok.text in male | female and tok.ent_iob_ == "B":
                new = rng.choice(names["female"] if tok.text in male else names["male"])
            elif tok.pos_ in ("NOUN", "PROPN", "ADJ") and (tok.lower_ in pairs or tok.text in pairs):
                new = pairs.get(tok.text) or pairs[tok.lower_]
            if new:
                edits.replace(tok.i, match_case(tok.text, new))
        return edits.render() if edits else None


# --------------------------------------------------------------------------- numbers

def _is_year(tok: Token) -> bool:
    """A four-digit number that reads as a year (a DATE, or after a preposition, not counting a noun)."""
    text = tok.text
    if not (text.isdigit() and len(text) == 4 and 1100 <= int(text) < 2100):
        return False
    counts_noun = tok.dep_ == "nummod" and tok.head.tag_ == "NNS"
    return not counts_noun and (tok.ent_type_ == "DATE" or tok.i > 0 and tok.doc[tok.i - 1].pos_ in ("ADP", "PUNCT"))


@register
class NumericToWord(Augmentation):
    """Read numbers aloud: ordinals, years, dates, times, ranges, fractions, phones, amounts, percentages."""

    name = "NumericToWord"
    meaning = Meaning.PRESERVING.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; words from num2words"
    rule = ("every number outside codes and names is read aloud with what belongs to it: years ('1871' -> "
            "'eighteen seventy-one'), amounts ('$44.7m' -> 'forty-four point seven million dollars'), units kept "
            "apart ('6pm' -> 'six pm'), signs, %, dates ('14/07/2021' -> 'the fourteenth of July twenty "
            "twenty-one'), ranges ('5-14' -> 'five to fourteen'), fractions, times, phone numbers digit by digit")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        def is_year(start: int, end: int) -> bool:
            span = doc.char_span(start, end, alignment_mode="expand")
            return span is not None and len(span) == 1 and _is_year(span[0])

        out = spell_numbers(text, is_year)
        if out is None or out == text:
            return None
        return out[:1].upper() + out[1:] if text[:1].isdigit() or text[:1] in "+-−.$€£¥₹(" else out
