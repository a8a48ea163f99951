"""Input sanity: data that would train or score without meaning is refused in one line naming the file.

A corpus or a labelled sample can be read without error and still mean nothing: a header naming one column
twice (the reader keeps one of them), a corpus of a few lines repeated (a batch of copies: every in-batch
negative is the positive itself), a corpus that is mostly undecodable bytes or symbols, a labelled sample whose
clustering score is fixed by its labels rather than by the model. Training and evaluation call these checks
where they read their data; the thresholds are stated here and in docs/FAULTS.md ("Degenerate input").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

SAMPLE = 10_000  # kept corpus lines looked at (the first ones): the checks cost the same for any corpus size
MIN_DISTINCT_SHARE = 0.5  # fewer distinct lines than this share of the sample: flagged (a warning)
MAX_UNREADABLE_SHARE = 0.5  # more undecodable or malformed lines than this share of those read: refused
MIN_LETTER_SHARE = 0.5  # a line is text when at least this share of its non-space characters are letters
MAX_NON_TEXT_SHARE = 0.5  # more lines of the sample that are not text than this share: refused


def check_header(header: Sequence[str], where: str) -> None:
    """A header naming a column twice is refused: a reader keeps only one of the two."""
    twice = sorted(name for name, count in Counter(header).items() if count > 1)
    if twice:
        raise ValueError(f"{where}: the header names column {twice[0]!r} {Counter(header)[twice[0]]} times "
                         f"(header: {','.join(header)}); rename the columns so that each is named once")


def is_text(line: str) -> bool:
    """At least :data:`MIN_LETTER_SHARE` of the line's non-space characters are letters."""
    chars = [c for c in line if not c.isspace()]
    return bool(chars) and sum(c.isalpha() for c in chars) >= MIN_LETTER_SHARE * len(chars)


def check_text(where: str, sample: Sequence[str], read: int, unreadable: int) -> None:
    """Refuse a corpus that is mostly unreadable or not text (``sample``: the first kept lines, at most
    :data:`SAMPLE`)."""
    if read and unreadable > MAX_UNREADABLE_SHARE * read:
        from augcse.core.textfile import why_not_utf8

        raise ValueError(f"corpus {where}: {unreadable} of its {read} lines are undecodable or malformed (more than "
                         f"{MAX_UNREADABLE_SHARE:.0%}); {why_not_utf8(where)}")
    non_text = sum(not is_text(line) for line in sample)
    if sample and non_text > MAX_NON_TEXT_SHARE * len(sample):
        raise ValueError(f"corpus {where}: {non_text} of the first {len(sample)} kept lines are not text (under "
                         f"{MIN_LETTER_SHARE:.0%} letters); it holds no sentences to train on: check the file")


def check_distinct(where: str, sample: Sequence[str], batch: int) -> str | None:
    """Refuse a corpus whose distinct lines cannot fill one batch; a warning line when it is mostly repeats."""
    distinct = len(set(sample))
    if distinct < batch:
        raise ValueError(f"corpus {where}: only {distinct} distinct lines among the first {len(sample)}, fewer than "
                         f"one batch of {batch}: in-batch negatives would be copies of the positives; give more "
                         "distinct texts (or set data.dedupe=true to see what is left)")
    if distinct < MIN_DISTINCT_SHARE * len(sample):
        return (f"corpus {where}: {distinct} distinct lines among the first {len(sample)} (under "
                f"{MIN_DISTINCT_SHARE:.0%}); repeated texts are negatives of themselves: consider data.dedupe=true")
    return None


def check_labels(where: str, labels: Sequence[str]) -> None:
    """A labelled sample whose clustering score its labels alone decide is refused: an empty label (it would
    count as a class), fewer than two classes, or about one text per label (any clustering then scores
    near 100)."""
    empty = sum(not label.strip() for label in labels)
    if empty:
        raise ValueError(f"{where}: {empty} rows have an empty label (it would count as a class of its own); "
                         "label them or remove them")
    classes = Counter(labels)
    if len(classes) < 2:
        found = f"only {next(iter(classes))!r}" if classes else "no rows"
        raise ValueError(f"{where}: needs at least 2 distinct labels to score a clustering, found {found}; "
                         "label the rows by group")
    if 2 * len(classes) > len(labels):
        raise ValueError(f"{where}: {len(classes)} labels for {len(labels)} rows (under 2 texts per label): a "
                         "clustering of such labels scores near 100 whatever the model; label more texts per group")
