"""Small helpers to rewrite a parsed sentence while keeping its original spacing and casing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc, Token


ATTACHED = (",", ".", ";", ":", "!", "?")


class Edits:
    """Token-level edits on a ``Doc``, rendered back to text with the original whitespace.

    ``replace(i, s)`` swaps token ``i`` for ``s`` ("" deletes it); ``before(i, s)``/``after(i, s)``
    insert words around it. Punctuation insertions (``,``) attach to the preceding word.
    """

    def __init__(self, doc: Doc) -> None:
        self.doc = doc
        self.sub: dict[int, str] = {}
        self.pre: dict[int, list[str]] = {}
        self.post: dict[int, list[str]] = {}

    def replace(self, i: int, text: str) -> "Edits":
        self.sub[i] = text
        return self

    def delete(self, i: int) -> "Edits":
        return self.replace(i, "")

    def replace_span(self, start: int, end: int, text: str) -> "Edits":
        """Put ``text`` in place of tokens ``start`` to ``end - 1`` (a multi-word name or phrase)."""
        self.replace(start, text)
        for i in range(start + 1, end):
            self.delete(i)
        return self

    def before(self, i: int, text: str) -> "Edits":
        self.pre.setdefault(i, []).append(text)
        return self

    def after(self, i: int, text: str) -> "Edits":
        self.post.setdefault(i, []).append(text)
        return self

    def __bool__(self) -> bool:
        return bool(self.sub or self.pre or self.post)

    def render(self) -> str:
        if not self:
            return self.doc.text
        pieces: list[list] = []  # [text, space_after]

        def push(word: str, space: bool, edited: bool = True) -> None:
            if edited and word[:1] in ATTACHED and pieces:
                pieces[-1][1] = False
            pieces.append([word, space])

        for tok in self.doc:
            i = tok.i
            for word in self.pre.get(i, []):
                push(word, True)
            body = self.sub.get(i, tok.text)
            ws = bool(tok.whitespace_)
            if not body:
                if pieces:
                    nxt = self.doc[i + 1] if i + 1 < len(self.doc) else None
                    closing = nxt is None or (nxt.is_punct and not nxt.is_left_punct)
                    pieces[-1][1] = ws or (pieces[-1][1] and not closing)
                continue
            post = self.post.get(i, [])
            push(body, ws if not post else True, edited=i in self.sub)
            for k, word in enumerate(post):
                push(word, ws if k == len(post) - 1 else True)
        return "".join(w + (" " if s else "") for w, s in pieces).strip()


def match_case(template: str, word: str) -> str:
    """Give ``word`` the casing pattern of ``template`` (Title, UPPER or lower)."""
    if not word:
        return word
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def decapitalize(tok: Token) -> str:
    """Lower-case a sentence-initial word unless it is a name, an acronym or "I"."""
    text = tok.text
    if text == "I" or tok.pos_ == "PROPN" or tok.ent_type_ or (text.isupper() and len(text) > 1):
        return text
    return text[:1].lower() + text[1:]
