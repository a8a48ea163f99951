"""Grammar helpers shared by the parse-based rules: clitic stems, do-support, the ROOT, subject and its number."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc, Span, Token


# Clitic stems spaCy leaves after splitting a negative contraction ("ca n't", "wo n't", "sha n't").
CLITIC_STEMS = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}
BE_FORMS = {"am", "is", "are", "was", "were", "be", "been", "being", "'s", "'re", "'m"}
MODAL_LIKE = {"can", "could", "will", "would", "shall", "should", "may", "might", "must"}
PLURAL_PRONOUNS = {"we", "they", "you", "i", "these", "those", "us", "them", "me"}


def do_form(tag: str) -> str:
    """The do-support auxiliary that carries the tense of a verb with Penn tag ``tag``."""
    return {"VBZ": "does", "VBD": "did"}.get(tag, "do")


def root_of(doc: Doc | Span) -> Token:
    """The ROOT token (the first token when the parse has none)."""
    return next((t for t in doc if t.dep_ == "ROOT"), doc[0])


def subject_of(verb: Token) -> Token | None:
    return next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass", "expl")), None)


def is_plural(tok: Token | None) -> bool:
    """Whether a subject head is grammatically plural (for verb agreement)."""
    if tok is None:
        return False
    if tok.lower_ in PLURAL_PRONOUNS:
        return True
    if tok.tag_ in ("NNS", "NNPS"):
        return True
    return any(c.dep_ == "conj" for c in tok.children)
