"""Rewrites that look words up in WordNet: antonyms, hypernyms/hyponyms, synonyms."""

from __future__ import annotations

from typing import TYPE_CHECKING

import random

from augcse.text.augment.base import NL_AUGMENTER, Augmentation, Meaning, register
from augcse.text.augment.lexicon import antonyms, inflect, related_nouns, synonyms
from augcse.text.augment.text import Edits, match_case

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc, Token


def _form(tok: Token, lemma: str) -> str:
    """``lemma`` inflected like ``tok`` (plural nouns, verb tenses) with ``tok``'s casing."""
    tag = tok.tag_
    word = inflect(lemma, tag) if tag in ("NNS", "VBD", "VBG", "VBN", "VBZ") else lemma
    return match_case(tok.text, word)


def _standalone(tok: Token) -> bool:
    """Not part of a hyphenated compound ("live-action")."""
    doc = tok.doc
    glued_next = not tok.whitespace_ and tok.i + 1 < len(doc) and doc[tok.i + 1].text in ("-", "/")
    glued_prev = tok.i > 0 and not doc[tok.i - 1].whitespace_ and doc[tok.i - 1].text in ("-", "/")
    return tok.is_alpha and not glued_next and not glued_prev


def _plain(words: tuple[str, ...], max_words: int = 2) -> tuple[str, ...]:
    """Lower-case entries of at most ``max_words`` words (drops proper names and long phrases)."""
    return tuple(w for w in words if w.islower() and w.count(" ") < max_words)


def _antonym_candidates(doc: Doc, pos: tuple[str, ...]) -> list[tuple[Token, tuple[str, ...]]]:
    out = []
    for tok in doc:
        if tok.pos_ in pos and tok.tag_ in ("JJ", "RB") and _standalone(tok):
            ants = antonyms(tok.lemma_.lower(), tok.pos_)
            if ants:
                out.append((tok, ants))
    return out


@register
class SentenceAdjectivesAntonymsSwitch(Augmentation):
    """Replace every adjective that has a WordNet antonym with it ("beautiful" -> "ugly")."""

    name = "SentenceAdjectivesAntonymsSwitch"
    meaning = Meaning.ALTERING.value
    needs = ("parse", "wordnet")
    source = NL_AUGMENTER
    rule = "every adjective with a direct WordNet antonym is replaced by its first antonym"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        edits = Edits(doc)
        for tok, ants in _antonym_candidates(doc, ("ADJ",)):
            edits.replace(tok.i, match_case(tok.text, ants[0]))
        return edits.render() if edits else None


@register
class AntonymSubstitute(Augmentation):
    """Replace an odd number of adjectives/adverbs with antonyms (AugCSE's odd-count change)."""

    name = "AntonymSubstitute"
    meaning = Meaning.ALTERING.value
    needs = ("parse", "wordnet")
    source = NL_AUGMENTER + "; AugCSE changed the count from even to odd"
    rule = "choose an odd number of the adjectives/adverbs that have WordNet antonyms and replace them"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        cands = _antonym_candidates(doc, ("ADJ", "ADV"))
        if not cands:
            return None
        k = rng.choice(range(1, len(cands) + 1, 2))
        edits = Edits(doc)
        for tok, ants in rng.sample(cands, k):
            edits.replace(tok.i, match_case(tok.text, rng.choice(ants)))
        return edits.render()


class _SampledSubstitution(Augmentation):
    """Replace each candidate word with probability ``p`` (at least one) by one of its WordNet words."""

    needs = ("parse", "wordnet")
    defaults = {"p": 0.5}

    def candidates(self, doc: Doc) -> list[tuple[Token, tuple[str, ...]]]:
        """The words that may be replaced, each with its replacements."""
        raise NotImplementedError

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        cands = self.candidates(doc)
        if not cands:
            return None
        chosen = [c for c in cands if rng.random() < self.params["p"]] or [rng.choice(cands)]
        edits = Edits(doc)
        for tok, words in chosen:
            edits.replace(tok.i, _form(tok, rng.choice(words)))
        return edits.render()


class _RelatedNoun(_SampledSubstitution):
    relation = "hypernym"
    meaning = Meaning.ALTERING.value
    source = NL_AUGMENTER

    def candidates(self, doc: Doc) -> list[tuple[Token, tuple[str, ...]]]:
        return [(t, r) for t in doc if t.pos_ == "NOUN" and _standalone(t)
                for r in [_plain(related_nouns(t.lemma_.lower(), self.relation))] if r]


@register
class ReplaceHypernyms(_RelatedNoun):
    """Replace common nouns with a more general word ("red" -> "colour")."""

    name = "ReplaceHypernyms"
    relation = "hypernym"
    rule = "each common noun with a WordNet hypernym (most frequent sense) is replaced with probability p (at least one)"


@register
class ReplaceHyponyms(_RelatedNoun):
    """Replace common nouns with a more specific word ("cutlery" -> "spoon")."""

    name = "ReplaceHyponyms"
    relation = "hyponym"
    rule = "each common noun with a WordNet hyponym (most frequent sense) is replaced with probability p (at least one)"


SYNONYM_POS = ("NOUN", "VERB", "ADJ", "ADV")


@register
class SynonymSubstitution(_SampledSubstitution):
    """EDA-style synonym replacement with WordNet, matched to the word's part of speech."""

    name = "SynonymSubstitution"
    meaning = Meaning.PRESERVING.value
    source = NL_AUGMENTER + "; Wei and Zou (2019) EDA"
    rule = "each content word (not a stop word) with a same-POS WordNet synonym is replaced with probability p (at least one)"

    def candidates(self, doc: Doc) -> list[tuple[Token, tuple[str, ...]]]:
        cands = []
        for tok in doc:
            if tok.pos_ in SYNONYM_POS and _standalone(tok) and not tok.is_stop and tok.lemma_.lower() != "be":
                syns = _plain(synonyms(tok.lemma_.lower(), tok.pos_), 1 if tok.pos_ == "VERB" else 2)
                if syns:
                    cands.append((tok, syns))
        return cands
