"""ESimCSE's positive as the authors' ``train.py`` builds it: ids repeated within the sentence already cut to
``--max_seq_length``, the positive not cut again; the code's draw by default, the paper's on request."""

from __future__ import annotations

import pytest

from augcse.text.views.esimcse import CODE_CAP, RepetitionDraws, cut, double_tokens
from augcse.studies.reproduce import papers, resolved

SENTENCE = "the cat sat on the mat and the dog ran to the park"  # one word piece a word


def authors_positive(ids: list[int], doubled: list[int]) -> list[int]:
    """train.py's bpe form written out: each id at a chosen index (counted with [CLS]) is written twice."""
    out = []
    for i, token in enumerate(ids):
        out += [token, token] if i in doubled else [token]
    return out


def test_the_positive_by_hand(tiny_st):
    """Cut to 8 ids ([CLS] + 6 words + [SEP]) and double the 2nd and 5th words: the authors' 10 ids."""
    tokenizer = tiny_st.tokenizer
    spans = tokenizer(SENTENCE, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    anchor, kept = cut(SENTENCE, spans, 8 - 2)
    assert anchor == "the cat sat on the mat"
    positive = double_tokens(anchor, kept, [1, 4])
    assert positive == "the cat cat sat on the the mat"
    truncated = tokenizer(SENTENCE, truncation=True, max_length=8)["input_ids"]
    assert tokenizer(anchor)["input_ids"] == truncated
    assert tokenizer(positive)["input_ids"] == authors_positive(truncated, [2, 5])  # 10 ids: not cut back to 8


def test_the_view_repeats_within_the_cut_and_never_cuts_the_positive(tiny_st):
    tokenizer = tiny_st.tokenizer
    draws = RepetitionDraws(seed=3, dup_rate=0.32, unit="subword", draw="code", column="positive",
                            tokenizer=tokenizer, max_seq_length=8)
    truncated = tokenizer(SENTENCE, truncation=True, max_length=8)["input_ids"]
    added = set()
    for epoch in range(60):
        anchor, positive = draws.pair(SENTENCE, epoch)
        assert tokenizer(anchor)["input_ids"] == truncated  # the anchor the authors' tokenizer call gives
        ids = tokenizer(positive)["input_ids"]
        extra = len(ids) - len(truncated)
        # the code's draw: randrange(min(10, int(0.32 · 8))) = randrange(2), over the 8 ids with specials
        assert extra in (0, 1) and ids[0] == truncated[0] and ids[-1] == truncated[-1]
        added.add(extra)
    assert added == {0, 1}
    batch = draws({"anchor": [SENTENCE], "positive": [SENTENCE]})
    assert batch["anchor"] == ["the cat sat on the mat"]


def test_without_a_cut_the_whole_sentence_is_repeated(tiny_st):
    draws = RepetitionDraws(seed=3, dup_rate=0.32, unit="subword", draw="code", column="positive",
                            tokenizer=tiny_st.tokenizer)
    anchor, positive = draws.pair(SENTENCE, 0)
    assert anchor == SENTENCE and positive.startswith("the")


def test_both_draws_are_available_and_the_code_is_the_default(tiny_st):
    from augcse.text.views import validate_view_specs

    (spec,) = validate_view_specs([{"name": "esimcse_repetition"}])
    assert spec["draw"] == "code" and spec["max_seq_length"] is None
    long = " ".join(["word"] * 60)
    for draw, most in (("code", CODE_CAP - 1), ("paper", max(2, int(0.5 * 60)))):
        draws = RepetitionDraws(seed=1, dup_rate=0.5, unit="subword", draw=draw, column="positive",
                                tokenizer=tiny_st.tokenizer)
        counts = [len(draws.repeat(long, epoch).split()) - 60 for epoch in range(200)]
        assert max(counts) <= most and (draw == "code" or max(counts) > CODE_CAP - 1), draw


@pytest.mark.parametrize(("paper", "name"), [("sda", "esimcse-bert-base"), ("sda", "esimcse-roberta-base"),
                                             ("cards", "esimcse-roberta-base"), ("cards", "esimcse-roberta-large")])
def test_the_rows_build_the_authors_positive(paper, name):
    values = resolved({row.name: row for row in papers()[paper].rows}[name])
    view = values["data"]["views"][0]
    assert (view["draw"], view["max_seq_length"]) == ("code", 32)
    assert values["model"]["max_seq_length"] == 32 + CODE_CAP - 1  # the collator cuts no repeat
