"""How many tokens longer ESimCSE's positive is than its anchor, with and without the authors' cut.

The authors' ``train.py`` repeats ids within the sentence already cut to 32 tokens and does not cut the
positive again; without the view's ``max_seq_length`` the whole sentence is repeated and the collator cuts
both to 32. Counted on the lines of the data directory's wiki slice over 30 word pieces (the first 2,000),
with all-MiniLM-L6-v2's tokenizer (BERT-uncased word pieces), the code's draw, dup_rate 0.32, seed 42:

    python benchmarks/esimcse_positive_length.py --data-dir $AUGCSE_DATA
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from augcse.assets.resolve import resolve_model
from augcse.text.views.esimcse import CODE_CAP, RepetitionDraws

CUT = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
    text = (args.data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    long = [line for line in lines if len(tokenizer(line, add_special_tokens=False)["input_ids"]) > CUT - 2]
    sample = long[:args.lines]

    def ids(sentence: str, cut: int) -> int:
        return len(tokenizer(sentence, truncation=True, max_length=cut)["input_ids"])

    whole = RepetitionDraws(42, 0.32, "subword", "code", "positive", tokenizer)
    authors = RepetitionDraws(42, 0.32, "subword", "code", "positive", tokenizer, max_seq_length=CUT)
    without = [ids(whole.repeat(line), CUT) - ids(line, CUT) for line in sample]
    pairs = [authors.pair(line) for line in sample]
    cut = [ids(positive, CUT + CODE_CAP - 1) - ids(anchor, CUT + CODE_CAP - 1) for anchor, positive in pairs]
    print(f"{len(lines)} lines, {len(long)} ({len(long) / len(lines):.1%}) over {CUT - 2} word pieces; "
          f"the first {len(sample)}:")
    print(f"positive − anchor tokens, whole sentence repeated, both cut to {CUT}: mean {statistics.fmean(without):.2f}")
    print(f"positive − anchor tokens, the authors' cut (view max_seq_length {CUT}): mean {statistics.fmean(cut):.2f}, "
          f"max {max(cut)}")


if __name__ == "__main__":
    main()
