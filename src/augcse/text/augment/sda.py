"""SDA (Zhu et al.): Punctuation Insertion, Modal Verbs, Double Negation and the Negation hard negative.

Each rule has a ``variant``: ``"paper"`` follows the paper's Algorithms 1-3, ``"code"`` follows the
authors' released augmentation tools (docs/PAPERS.md §3). Where that code has plain bugs (misplaced
comma from a first-match index, "not not", skipped tokens after a deletion, case-sensitive "Not"),
both variants implement the intended rule; docs/AUGMENTATIONS.md lists the differences.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Callable

from augcse.text.augment.base import Augmentation, Meaning, register
from augcse.text.augment.grammar import BE_FORMS, CLITIC_STEMS, MODAL_LIKE, do_form, root_of
from augcse.text.augment.lexicon import inflect
from augcse.text.augment.text import Edits, capitalize_first, decapitalize

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc, Token

VARIANTS = ("code", "paper")
CLAUSE_DEPS = {"acl", "advcl", "ccomp", "csubj", "csubjpass", "relcl", "xcomp"}
SOURCE = "SDA (Zhu et al.) §4 and App. A; authors' augmentation_tools"
MARKS = (",", ".", ";", "!")  # the final marks PI draws from (the authors' PI.py); SDA's Random Insertion too
TEMPLATES = (
    "It isn't that", "The fact is not that", "It is not true that", "It is not the truth that", "Not that",
    "There is no way that", "There is no chance that", "It is impossible that", "It can't be that",
)


def _is_punct(tok: Token) -> bool:
    return tok.is_punct or tok.pos_ == "PUNCT"


def _first_change(text: str, rules: list[Callable[[], str | None]]) -> str | None:
    """The first rule output that differs from ``text``: the authors' code tries its rules in turn."""
    for rule in rules:
        out = rule()
        if out is not None and out != text:
            return out
    return None


class _SdaRule(Augmentation):
    """An SDA rule on a parsed, non-empty sentence, in the paper's or the authors' code's ``variant``."""

    needs = ("parse",)
    defaults = {"variant": "code"}
    choices = {"variant": VARIANTS}

    @property
    def paper(self) -> bool:
        return self.params["variant"] == "paper"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        if doc is None or len(doc) == 0:
            return None
        return self.rewrite_doc(text, rng, doc)

    def rewrite_doc(self, text: str, rng: random.Random, doc: Doc) -> str | None:
        raise NotImplementedError


# --------------------------------------------------------------------------- Punctuation Insertion

def _clause_comma(doc: Doc) -> str | None:
    """Insert "," at the start of the first subordinate clause (after it when it opens the sentence)."""
    for tok in doc:
        if tok.dep_ not in CLAUSE_DEPS:
            continue
        start, end = tok.left_edge.i, tok.right_edge.i
        if start > 0:
            if _is_punct(doc[start - 1]) or _is_punct(doc[start]):
                continue
            return Edits(doc).after(start - 1, ",").render()
        if end + 1 < len(doc) and not _is_punct(doc[end + 1]) and not _is_punct(doc[end]):
            return Edits(doc).after(end, ",").render()
    return None


def _subject_span(doc: Doc, first_child_only: bool) -> tuple[int, int] | None:
    root = root_of(doc)
    children = list(root.children)
    if first_child_only:
        candidates = children[:1]
    else:
        candidates = [c for c in children if c.i < root.i]
    subj = next((c for c in candidates if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None:
        return None
    start, end = subj.left_edge.i, subj.right_edge.i
    while end > start and _is_punct(doc[end]):
        end -= 1
    return start, end


@register
class PunctuationInsertion(_SdaRule):
    """Insert a comma at a clause boundary or after the subject, else change the final punctuation."""

    name = "PunctuationInsertion"
    meaning = Meaning.PRESERVING.value
    source = SOURCE + " (PI)"
    rule = ("code: try subject-comma/quotes or clause-comma in random order, else random final punctuation "
            "or quotes; paper (Alg. 1): clause comma, else comma after the subject, else final '!'")

    def rewrite_doc(self, text: str, rng: random.Random, doc: Doc) -> str | None:
        if self.paper:
            return _clause_comma(doc) or self._subject(doc, rng, quotes=False) or self._tail_paper(doc)
        rules = [lambda: self._subject(doc, rng, quotes=True), lambda: _clause_comma(doc)]
        rng.shuffle(rules)
        out = _first_change(text, rules)
        return out if out is not None else self._tail_code(doc, rng)

    @staticmethod
    def _subject(doc: Doc, rng: random.Random, quotes: bool) -> str | None:
        span = _subject_span(doc, first_child_only=quotes)
        if span is None:
            return None
        start, end = span
        if quotes and rng.random() < 0.5:
            return _quote(doc, start, end)
        if end + 1 < len(doc) and _is_punct(doc[end + 1]):
            return None
        return Edits(doc).after(end, ",").render()

    @staticmethod
    def _tail_code(doc: Doc, rng: random.Random) -> str:
        if rng.random() < 0.5:
            return _quote(doc, 0, len(doc) - 1)
        last = doc[-1]
        if _is_punct(last):
            mark = rng.choice([p for p in MARKS if p != last.text])
            return Edits(doc).replace(last.i, mark).render()
        return Edits(doc).after(last.i, rng.choice(MARKS)).render()

    @staticmethod
    def _tail_paper(doc: Doc) -> str | None:
        last = doc[-1]
        if _is_punct(last):
            return None if last.text == "!" else Edits(doc).replace(last.i, "!").render()
        return Edits(doc).after(last.i, "!").render()


def _quote(doc: Doc, start: int, end: int) -> str:
    """Wrap tokens [start, end] in single quotes."""
    before = doc[:start].text_with_ws if start else ""
    inner = doc[start:end + 1].text
    after = doc[end].whitespace_ + doc[end + 1:].text if end + 1 < len(doc) else ""
    return f"{before}'{inner}'{after}"


# --------------------------------------------------------------------------- Modal Verbs

MODALS_CODE = ("must", "have to", "have no choice but", "cannot but", "can't avoid to", "can't help but",
               "should", "need to", "ought to")
MODALS_PAPER = ("must", "should", "ought to", "have to", "can't but", "can't help to")
INTENSIFIERS = ("extremely", "quite", "very", "particularly", "especially", "absolutely", "totally", "really",
                "remarkably")


def _agree(modal: str, tense: str) -> str:
    """Tense/person agreement inside a modal phrase: "have to" -> "has to"/"had to"."""
    if tense in ("VBZ", "is"):
        return modal.replace("have", "has").replace("need to", "needs to")
    if tense in ("VBD", "was", "were"):
        return modal.replace("have", "had").replace("need to", "needed to")
    return modal


@register
class ModalVerbs(_SdaRule):
    """Put a modal verb phrase in front of the main predicate (SDA MV)."""

    name = "ModalVerbs"
    meaning = Meaning.POSSIBLY.value
    source = SOURCE + " (MV)"
    rule = ("code: modal before the first aux/be-verb or the ROOT verb with has/had agreement, or an "
            "intensifier before every adjective (random order, fall back to the other); paper (Alg. 2): "
            "first be-verb -> 'mv be', else ROOT verb -> 'mv lemma' (past: 'mv have' + participle)")

    def rewrite_doc(self, text: str, rng: random.Random, doc: Doc) -> str | None:
        if self.paper:
            return self._verb_paper(doc, rng.choice(MODALS_PAPER))
        modal = rng.choice(MODALS_CODE)
        intensifier = rng.choice(INTENSIFIERS)
        rules = [lambda: self._verb(doc, modal), lambda: self._adjectives(doc, intensifier)]
        if rng.random() >= 0.5:
            rules.reverse()
        return _first_change(text, rules)

    @staticmethod
    def _verb(doc: Doc, modal: str) -> str | None:
        for tok in doc:
            if tok.dep_ in ("aux", "auxpass", "ROOT") and _negated(tok):
                return None  # "must be not" is not English; the authors' code would write it
            if tok.dep_ in ("aux", "auxpass"):
                word = tok.lower_
                if word in ("am", "are", "be", "'m", "'re"):
                    return Edits(doc).replace(tok.i, _case(tok, f"{modal} be")).render()
                if word in ("is", "'s") and tok.lemma_ == "be":
                    return Edits(doc).replace(tok.i, _case(tok, f"{_agree(modal, 'is')} be")).render()
                if word in ("was", "were"):
                    return Edits(doc).replace(tok.i, _case(tok, f"{_agree(modal, 'was')} be")).render()
                return None  # the first auxiliary decides, as in the authors' code
            if tok.dep_ == "ROOT":
                if tok.lemma_ == "be" and tok.lower_ in BE_FORMS:
                    tense = "is" if tok.lower_ in ("is", "'s") else "was" if tok.lower_ in ("was", "were") else ""
                    return Edits(doc).replace(tok.i, _case(tok, f"{_agree(modal, tense)} be")).render()
                if tok.tag_ in ("VBP", "VBZ", "VBD"):
                    verb = f"{_agree(modal, tok.tag_)} {tok.lemma_.lower() if tok.pos_ != 'PROPN' else tok.lemma_}"
                    return Edits(doc).replace(tok.i, _case(tok, verb)).render()
                return None
        return None

    @staticmethod
    def _adjectives(doc: Doc, intensifier: str) -> str | None:
        edits = Edits(doc)
        for tok in doc:
            if tok.pos_ == "ADJ" and tok.tag_ == "JJ" and not tok.like_num:
                if tok.i == 0:
                    edits.replace(0, f"{capitalize_first(intensifier)} {decapitalize(tok)}")
                else:
                    edits.before(tok.i, intensifier)
        return edits.render() if edits else None

    @staticmethod
    def _verb_paper(doc: Doc, modal: str) -> str | None:
        for tok in doc:
            if _negated(tok):
                continue
            if tok.lemma_ == "be" and tok.lower_ in {"am", "is", "are", "was", "were", "'s", "'re", "'m"}:
                past = tok.lower_ in ("was", "were")
                return Edits(doc).replace(tok.i, _case(tok, f"{modal} {'have been' if past else 'be'}")).render()
            if tok.dep_ == "ROOT" and tok.pos_ == "VERB" and tok.tag_ in ("VBP", "VBZ", "VBD"):
                if any(c.dep_ in ("aux", "auxpass") for c in tok.children):
                    return None
                if tok.tag_ == "VBD":
                    phrase = f"{modal} have {inflect(tok.lemma_.lower(), 'VBN', like=tok.text)}"
                else:
                    phrase = f"{modal} {tok.lemma_.lower()}"
                return Edits(doc).replace(tok.i, _case(tok, phrase)).render()
        return None


def _negated(tok: Token) -> bool:
    """Whether ``tok`` (an auxiliary or a verb) carries a negation."""
    head = tok.head if tok.dep_ in ("aux", "auxpass") else tok
    return any(c.dep_ == "neg" for c in head.children)


def _case(tok: Token, phrase: str) -> str:
    return capitalize_first(phrase) if tok.i == 0 and tok.text[:1].isupper() else phrase


# --------------------------------------------------------------------------- negation

NEG_DELETE = {"no", "not", "n't"}
SPECIAL_ROOTS = {"am", "is", "was", "are", "were"} | MODAL_LIKE


class _Negator:
    """One negative transformation at a time over a ``Doc``, remembering what it already touched."""

    def __init__(self, doc: Doc) -> None:
        self.doc = doc
        self.edits = Edits(doc)
        self.touched: set[int] = set()
        self.count = 0

    def delete(self, tok: Token) -> None:
        self.edits.delete(tok.i)
        if tok.lower_ == "n't" and tok.i > 0:
            prev = self.doc[tok.i - 1]
            if prev.lower_ in CLITIC_STEMS:
                self.edits.replace(prev.i, CLITIC_STEMS[prev.lower_])
            self.touched.add(prev.i)
        elif tok.head is not tok:
            self.touched.add(tok.head.i)
            self.touched.update(c.i for c in tok.head.children if c.dep_ in ("aux", "auxpass"))
        if tok.i == 0 and len(self.doc) > 1:
            self.edits.replace(1, capitalize_first(self.edits.sub.get(1, self.doc[1].text)))
        self.count += 1

    def not_after(self, tok: Token) -> None:
        if tok.lower_ == "can":
            self.edits.replace(tok.i, _case(tok, "cannot"))
        else:
            self.edits.after(tok.i, "not")
        self.touched.add(tok.i)
        self.count += 1

    def do_not(self, tok: Token) -> None:
        self.edits.replace(tok.i, _case(tok, f"{do_form(tok.tag_)} not {tok.lemma_.lower()}"))
        self.touched.add(tok.i)
        self.count += 1

    def negate_verb(self, tok: Token) -> bool:
        """Negate an auxiliary or the ROOT verb; False if ``tok`` cannot take a negation."""
        if tok.i in self.touched:
            return False
        if tok.dep_ in ("aux", "auxpass") and tok.tag_ != "TO":
            if any(c.dep_ == "neg" for c in tok.head.children):
                return False
            self.not_after(tok)
            return True
        if tok.dep_ == "ROOT":
            if any(c.dep_ == "neg" for c in tok.children):
                return False
            if tok.lower_ in SPECIAL_ROOTS:
                self.not_after(tok)
                return True
            if tok.tag_ in ("VBP", "VBZ", "VBD"):
                self.do_not(tok)
                return True
        return False

    def text(self) -> str:
        return self.edits.render()


def _negations(doc: Doc) -> list[Token]:
    return [t for t in doc if t.lower_ in NEG_DELETE and (t.dep_ == "neg" or t.lower_ != "no")]


@register
class DoubleNegation(_SdaRule):
    """Two negative transformations, which cancel out (SDA DN)."""

    name = "DoubleNegation"
    meaning = Meaning.POSSIBLY.value
    source = SOURCE + " (DN)"
    rule = ("code: delete no/not/n't, then add 'not' to auxiliaries / do-support on the ROOT until two "
            "transformations; with only one, prefix a random negating template; paper (Alg. 3): the same in "
            "one left-to-right pass, template 'Not that'")

    def rewrite_doc(self, text: str, rng: random.Random, doc: Doc) -> str | None:
        neg = _Negator(doc)
        if not self.paper:
            for tok in _negations(doc):
                neg.delete(tok)
            for tok in doc:
                if neg.count >= 2:
                    break
                neg.negate_verb(tok)
            template = rng.choice(TEMPLATES)
        else:
            negs = {t.i for t in _negations(doc)}
            for tok in doc:
                if neg.count >= 2:
                    break
                if tok.i in negs:
                    neg.delete(tok)
                else:
                    neg.negate_verb(tok)
            template = "Not that"
        if neg.count == 0:
            return None
        if neg.count == 1:
            return f"{template} {_lower_first(neg.text(), doc)}"
        return neg.text()


def _lower_first(text: str, doc: Doc) -> str:
    first = doc[0]
    if text.startswith(first.text) and decapitalize(first) != first.text:
        return decapitalize(first) + text[len(first.text):]
    return text


@register
class Negation(_SdaRule):
    """One negative transformation: the SDA hard negative (meaning-altering by design)."""

    name = "Negation"
    meaning = Meaning.ALTERING.value
    source = SOURCE + " (negation as negative sample)"
    rule = ("the first of: delete a negation word / add 'not' to an auxiliary / negate the ROOT verb "
            "(do-support); code: a non-verb ROOT gets 'no', nothing applicable -> random template; "
            "paper: nothing applicable -> random template")

    def rewrite_doc(self, text: str, rng: random.Random, doc: Doc) -> str | None:
        neg = _Negator(doc)
        negs = {t.i for t in _negations(doc)}
        for tok in doc:
            if tok.i in negs:
                neg.delete(tok)
                return neg.text()
            if neg.negate_verb(tok):
                return neg.text()
            if tok.dep_ == "ROOT" and not self.paper and not negs:
                if tok.pos_ in ("NOUN", "PROPN", "NUM") and tok.tag_ not in ("NNP", "NNPS"):
                    start = tok.left_edge.i if tok.left_edge.lower_ in ("a", "an", "the", "some") else tok.i
                    if start != tok.i:
                        neg.edits.replace(start, _case(doc[start], "no"))
                    elif start == 0:
                        neg.edits.replace(0, f"No {decapitalize(tok)}")
                    else:
                        neg.edits.before(start, "no")
                    return neg.text()
                if tok.tag_ in ("VB", "VBG", "VBN") or tok.pos_ in ("ADJ", "ADV", "ADP"):
                    if tok.i == 0:
                        prefix = "Do not" if tok.tag_ == "VB" else "Not"
                        return neg.edits.replace(0, f"{prefix} {decapitalize(tok)}").render()
                    neg.edits.before(tok.i, "do not" if tok.tag_ == "VB" and tok.i == 0 else "not")
                    return neg.text()
        return f"{rng.choice(TEMPLATES)} {_lower_first(doc.text, doc)}"
