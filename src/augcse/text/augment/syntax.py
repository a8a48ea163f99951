"""Rewrites of the sentence structure read off the dependency parse."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from augcse.text.augment.base import NL_AUGMENTER, Augmentation, Meaning, register
from augcse.text.augment.grammar import BE_FORMS, CLITIC_STEMS, is_plural, root_of, subject_of
from augcse.text.augment.lexicon import inflect
from augcse.text.augment.text import Edits, capitalize_first, decapitalize, match_case

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc, Span, Token


# --------------------------------------------------------------------------- negation removal

@register
class SentenceAuxiliaryNegationRemoval(Augmentation):
    """Remove the negation of auxiliaries, flipping the meaning ("was not" -> "was")."""

    name = "SentenceAuxiliaryNegationRemoval"
    meaning = Meaning.ALTERING.value
    needs = ("parse",)
    source = NL_AUGMENTER
    rule = ("'not'/'n't' attached to an auxiliary or copula is removed; 'do/does/did not V' becomes the "
            "inflected verb ('did not go' -> 'went'); 'cannot' -> 'can'")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        edits = Edits(doc)
        for tok in doc:
            if tok.lower_ == "cannot":
                edits.replace(tok.i, match_case(tok.text, "can"))
                continue
            if tok.dep_ != "neg" or tok.lower_ not in ("not", "n't"):
                continue
            head = tok.head
            auxes = [c for c in head.children if c.dep_ in ("aux", "auxpass") and c.i < tok.i]
            aux = auxes[-1] if auxes else (head if head.pos_ == "AUX" else None)
            if aux is None:
                continue
            edits.delete(tok.i)
            if aux.lower_ in CLITIC_STEMS:
                edits.replace(aux.i, match_case(aux.text, CLITIC_STEMS[aux.lower_]))
            if aux.lemma_ == "do" and aux is not head and head.pos_ == "VERB" and len(auxes) == 1:
                tag = {"does": "VBZ", "did": "VBD"}.get(aux.lower_, "VBP")
                edits.delete(aux.i)
                verb = inflect(head.lemma_.lower(), tag)
                edits.replace(head.i, capitalize_first(verb) if aux.i == 0 else verb)
        return edits.render() if edits else None


# --------------------------------------------------------------------------- subject/object switch

OBJECT_CASE = {"i": "me", "he": "him", "she": "her", "we": "us", "they": "them", "who": "whom"}
SUBJECT_CASE = {v: k for k, v in OBJECT_CASE.items()}


def _as_role(span: Span, role: str, sentence_start: bool) -> str:
    """Text of a noun phrase moved into subject or object position (pronoun case, initial capital)."""
    table = SUBJECT_CASE if role == "subject" else OBJECT_CASE
    words = [t.text_with_ws for t in span]
    if len(span) == 1 and span[0].lower_ in table:
        words = [table[span[0].lower_]]
        if words[0] == "i":
            words = ["I"]
    elif span.start == 0:
        words[0] = decapitalize(span[0]) + span[0].whitespace_
    text = "".join(words).strip()
    return capitalize_first(text) if sentence_start else text


@register
class SentenceSubjectObjectSwitch(Augmentation):
    """Swap the subject and the object (direct, else the first prepositional one) of the main verb."""

    name = "SentenceSubjectObjectSwitch"
    meaning = Meaning.ALTERING.value
    needs = ("parse",)
    source = NL_AUGMENTER
    rule = ("the nsubj and dobj subtrees of the ROOT verb trade places; pronoun case and the agreement of the "
            "finite verb or auxiliary (has/have, is/are/am, was/were, does/do) follow the new subject; without a "
            "direct object, the first prepositional object after the verb takes the subject's place")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        root = root_of(doc)
        subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        obj = next((c for c in root.children if c.dep_ == "dobj"), None) or \
            next((t for t in doc[root.i + 1:] if t.dep_ == "pobj"), None)
        if subj is None or obj is None or not subj.right_edge.i < root.i < obj.left_edge.i:
            return None
        s_span, o_span = doc[subj.left_edge.i:subj.right_edge.i + 1], doc[obj.left_edge.i:obj.right_edge.i + 1]
        if any(t.pos_ == "PUNCT" for t in s_span) or any(t.pos_ == "PUNCT" for t in o_span):
            return None
        edits = Edits(doc)
        edits.replace_span(s_span.start, s_span.end, _as_role(o_span, "subject", s_span.start == 0))
        edits.replace_span(o_span.start, o_span.end, _as_role(s_span, "object", False))
        finite = _finite_verb(root)
        new = _agreeing_form(finite, _person(obj)) if finite is not None else None
        if new is not None and new != finite.lower_:
            if finite.text.startswith("'"):  # a clitic ('s, 're) cannot take another form in place
                return None
            edits.replace(finite.i, match_case(finite.text, new))
        return edits.render()


BE_PRESENT = {"1sg": "am", "3sg": "is", "pl": "are"}
FINITE_TAGS = ("VBZ", "VBP", "VBD")


def _finite_verb(verb: Token) -> Token | None:
    """The word of the verb group that agrees with the subject: the first tensed auxiliary, or the verb."""
    aux = next((c for c in verb.lefts if c.dep_ in ("aux", "auxpass") and c.tag_ in FINITE_TAGS + ("MD",)), None)
    tok = aux if aux is not None else verb
    return tok if tok.tag_ in FINITE_TAGS else None


def _person(tok: Token) -> str:
    """'1sg', '3sg' or 'pl' (which 'you' shares) for a noun phrase head about to become the subject."""
    word = SUBJECT_CASE.get(tok.lower_, tok.lower_)
    if word == "i":
        return "1sg"
    return "pl" if word == "you" or is_plural(tok) else "3sg"


def _agreeing_form(tok: Token, person: str) -> str | None:
    """The form of the finite verb ``tok`` that agrees with a subject of ``person``; None if tense has none."""
    if tok.lemma_ == "be" or tok.lower_ in BE_FORMS:
        if tok.tag_ == "VBD":
            return "were" if person == "pl" else "was"
        return BE_PRESENT[person]
    if tok.tag_ == "VBD":
        return None
    return inflect(tok.lemma_.lower(), "VBZ" if person == "3sg" else "VBP")


# --------------------------------------------------------------------------- summarization

@register
class Summarization(Augmentation):
    """Keep only subject, verb and object, marking negation with '!' ("Stillwater !is film")."""

    name = "Summarization"
    meaning = Meaning.POSSIBLY.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; Zhang et al. (2021)"
    rule = "subject (with compound parts), '!' if negated, ROOT verb, object/attribute head (with compound parts)"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        root = root_of(doc)
        if root.pos_ not in ("VERB", "AUX"):
            return None
        subj = subject_of(root)
        obj = next((c for c in root.children if c.dep_ in ("dobj", "attr", "oprd", "acomp")), None)
        if subj is None or obj is None:
            return None
        negated = any(c.dep_ == "neg" for c in root.children)
        out = " ".join([_head_phrase(subj), ("!" if negated else "") + root.text, _head_phrase(obj)])
        return out if out != text else None


def _head_phrase(tok: Token) -> str:
    """The head word, with its compound parts when it is a name ("Ujjal Dev Dosanjh")."""
    parts = [c for c in tok.lefts if c.dep_ in ("compound", "flat") and c.pos_ == "PROPN"] if tok.pos_ == "PROPN" else []
    parts.append(tok)
    return " ".join(t.text for t in parts)


# --------------------------------------------------------------------------- reordering

SUBJECT_PRONOUNS = {"he", "she"}


@register
class SentenceReordering(Augmentation):
    """Shuffle the sentences of a multi-sentence input, re-naming moved sentence-initial he/she."""

    name = "SentenceReordering"
    meaning = Meaning.POSSIBLY.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; Lewis et al. (2020)"
    rule = ("needs two or more sentences; shuffle them (a different order); a sentence-initial he/she is replaced "
            "with the last PERSON named before it, a light stand-in for coreference resolution")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        sents = [s for s in doc.sents if s.text.strip()]
        if len(sents) < 2:
            return None
        texts, last_person = [], None
        for sent in sents:
            first = sent[0]
            body = sent.text
            if first.lower_ in SUBJECT_PRONOUNS and last_person is not None:
                body = last_person + body[len(first.text):]
            texts.append(body)
            persons = [e.text for e in sent.ents if e.label_ == "PERSON"]
            last_person = persons[-1] if persons else last_person
        order = list(range(len(texts)))
        while order == sorted(order):
            rng.shuffle(order)
        return " ".join(texts[i] for i in order)


# --------------------------------------------------------------------------- tense

PAST_AUX = {"is": "was", "am": "was", "are": "were", "has": "had", "have": "had", "do": "did", "does": "did",
            "will": "would", "can": "could", "'s": "was", "'re": "were", "'m": "was", "shall": "should"}
PRESENT_AUX_SG = {"was": "is", "were": "are", "had": "has", "did": "does", "would": "will", "could": "can"}
PRESENT_AUX_PL = {"was": "is", "were": "are", "had": "have", "did": "do", "would": "will", "could": "can"}


@register
class TenseTransformation(Augmentation):
    """Move the main clause between simple present and simple past (and their auxiliaries)."""

    name = "TenseTransformation"
    meaning = Meaning.POSSIBLY.value
    needs = ("parse",)
    source = NL_AUGMENTER + "; Logeswaran et al. (2018)"
    rule = ("if the main verb group is present, make it past, else make it past -> present: the first finite "
            "auxiliary or the ROOT verb is re-inflected with lemminflect; conjoined verbs follow")

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        root = root_of(doc)
        if root.pos_ not in ("VERB", "AUX"):
            return None
        verbs = [root] + [c for c in root.children if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX")]
        subj = subject_of(root)
        plural = is_plural(subj) or (subj is not None and subj.lower_ == "you")
        edits = Edits(doc)
        to_past = None
        for verb in verbs:
            finite = next((c for c in verb.children if c.dep_ in ("aux", "auxpass") and c.tag_ in
                           ("VBZ", "VBP", "VBD", "MD")), None)
            tok = finite if finite is not None else verb
            if tok.tag_ not in ("VBZ", "VBP", "VBD", "MD"):
                continue
            if to_past is None:
                to_past = tok.tag_ != "VBD" and tok.lower_ not in PRESENT_AUX_SG
            new = self._shift(tok, to_past, plural, subj is not None and subj.lower_ == "i")
            if new and new.lower() != tok.lower_:
                edits.replace(tok.i, match_case(tok.text, new))
        return edits.render() if edits else None

    @staticmethod
    def _shift(tok: Token, to_past: bool, plural: bool, first_person: bool) -> str | None:
        word = tok.lower_
        if to_past:
            if word in PAST_AUX:
                return "were" if word in ("are", "'re") else PAST_AUX[word]
            if tok.tag_ in ("VBZ", "VBP"):
                return inflect(tok.lemma_.lower(), "VBD")
            return None
        if word == "was" and first_person:
            return "am"
        table = PRESENT_AUX_PL if plural else PRESENT_AUX_SG
        if word in table:
            return table[word]
        if tok.tag_ == "VBD":
            return inflect(tok.lemma_.lower(), "VBP" if plural or first_person else "VBZ")
        return None


# --------------------------------------------------------------------------- Yoda

COMPLEMENT_DEPS = ("dobj", "attr", "acomp", "oprd")


@register
class YodaPerturbation(Augmentation):
    """Front the object or complement: "You still have much to learn." -> "Much to learn, you still have."."""

    name = "YodaPerturbation"
    meaning = Meaning.PRESERVING.value
    needs = ("parse",)
    source = NL_AUGMENTER
    rule = "the object/complement subtree after the ROOT verb moves to the front, followed by a comma (XSV order)"

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        root = root_of(doc)
        subj = subject_of(root)
        comp = next((c for c in root.rights if c.dep_ in COMPLEMENT_DEPS), None)
        if subj is None or comp is None or subj.left_edge.i != 0 or comp.pos_ == "PRON":
            return None
        start, end = comp.left_edge.i, comp.right_edge.i
        while end > start and doc[end].is_punct:
            end -= 1
        moved = doc[start:end + 1].text
        if any(t.is_punct for t in doc[start:end + 1]) and "," in moved:
            return None
        rest = Edits(doc)
        for i in range(start, end + 1):
            rest.delete(i)
        if start != 0:
            rest.replace(0, decapitalize(doc[0]))
        body = rest.render()
        return f"{capitalize_first(moved)}, {body}"
