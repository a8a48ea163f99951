"""Augmentations: contract, determinism, and the papers' own examples on real sentences."""

from __future__ import annotations

import re

import pytest

from augcse.text import augment
from augcse.text.augment import lexicon
from augcse.text.augment.base import Meaning

# Paper examples (AugCSE App. A.2, SDA Table 1, CARDS Table 2) and real Wikipedia sentences.
PAPER = [
    "He travelled widely in Europe.",
    "Ujjal Dev Dosanjh was not the 1st Premier of British Columbia from 1871 to 1872.",
    "Amanda's mother was very beautiful.",
    "Steve is able to recommend movies that depicts the lives of beautiful minds.",
    "Tom bought 3 apples, 1 orange, and 4 bananas and paid $10.",
    "Stillwater is not a 2010 American live-action/animated dark fantasy adventure film.",
    "You still have much to learn.",
    "He often doesn't come to school.",
    "It has plunged 13% since July to around 26 cents a pound.",
    "The story of the first book continues.",
]
EXTRA = [
    "The king met his wife in London. He loved her.",
    "John loves the girl.",
    "The dog chased the cats.",
    "I live in Germany.",
    "She does not like apples, however she eats them.",
    "Hello.",
]


@pytest.fixture(scope="module")
def wiki(data_dir):
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()
    return [s for s in lines[:40] if s.strip()]


@pytest.fixture(scope="module")
def sentences(wiki):
    return PAPER + EXTRA + wiki


@pytest.fixture(scope="module")
def docs(sentences):
    """One shared parse for the whole module."""
    return augment.parse(sentences)


def run(name, sentences, docs=None, seed=0, **params):
    if docs is None:
        docs = augment.parse(sentences) if augment.REGISTRY[name].needs[:1] == ("parse",) or \
            "parse" in augment.REGISTRY[name].needs else None
    return augment.get(name, **params).apply(sentences, seed, docs)


def one(name, sentence, seed=0, **params):
    return run(name, [sentence], seed=seed, **params)[0]


# --------------------------------------------------------------------------- registry and sets

def test_registry_has_all_families():
    assert len(augment.REGISTRY) >= 28
    for name, cls in augment.REGISTRY.items():
        assert cls.name == name
        assert cls.meaning in {m.value for m in Meaning}
        assert isinstance(cls.needs, tuple)
        assert cls.source and cls.rule, name
    for name in ["SentenceAdjectivesAntonymsSwitch", "AntonymSubstitute", "YodaPerturbation", "WordRepetition",
                 "PunctuationInsertion", "ModalVerbs", "DoubleNegation", "Negation", "SwitchCase",
                 "DiverseParaphrase", "Casual2Formal", "BackTranslation", "RandomContextualWordAugmentation"]:
        assert name in augment.REGISTRY


def test_sets():
    sets = augment.SETS
    assert sets["4-aug"] == ["DiverseParaphrase", "TenseTransformation", "RandomSwap", "ContractionExpansions"]
    assert len(sets["8-aug"]) == 8 and len(sets["12-aug"]) == 12 and len(sets["16-aug"]) == 16
    assert set(sets["4-aug"]) < set(sets["8-aug"]) < set(sets["12-aug"]) < set(sets["16-aug"])
    assert {"Casual2Formal", "DiverseParaphrase"} <= set(sets["8-aug"])
    assert sets["sda"] == ["PunctuationInsertion", "ModalVerbs", "DoubleNegation"]
    offline = sets["all-rule-based"]
    assert offline == augment.rule_based(), "augcse.core.augmentation_sets: all-rule-based differs from the registry"
    assert {n for members in sets.values() for n in members} <= set(augment.REGISTRY)
    assert "DiverseParaphrase" not in offline and "RandomContextualWordAugmentation" not in offline
    assert len(offline) >= 25 and "SwitchCase" in offline and "Negation" in offline
    assert "Casual2Formal" not in sets["8-2-aug"] and len(sets["8-2-aug"]) == 6
    assert augment.resolve_names("sda,Negation") == sets["sda"] + ["Negation"]
    with pytest.raises(ValueError, match="unknown"):
        augment.resolve_names("NoSuchAug")


def test_unknown_parameter_is_an_error():
    with pytest.raises(ValueError, match="unknown RandomSwap parameter 'rate'"):
        augment.get("RandomSwap", rate=0.3)
    with pytest.raises(ValueError, match="variant"):
        augment.get("Negation", variant="typo")


# --------------------------------------------------------------------------- contract for every rule-based one

@pytest.mark.parametrize("name", augment.SETS["all-rule-based"])
def test_contract(name, sentences, docs):
    aug = augment.get(name)
    out = aug.apply(sentences, seed=1, docs=docs)
    assert len(out) == len(sentences)
    assert all(isinstance(o, str) and o.strip() for o in out)
    assert out == aug.apply(sentences, seed=1, docs=docs), "not deterministic"
    # parallel-safe: a sentence's output does not depend on the batch it is in
    k = len(sentences) // 2
    assert aug.apply(sentences[k:], seed=1, docs=docs[k:]) == out[k:]
    assert sum(o != s for o, s in zip(out, sentences)) >= 1, "never applies"


def test_seed_changes_random_choices(sentences, docs):
    a = run("RandomSwap", sentences, seed=0)
    b = run("RandomSwap", sentences, seed=1)
    assert a != b


# --------------------------------------------------------------------------- AugCSE meaning-altering

def test_adjective_antonyms_paper_example():
    assert one("SentenceAdjectivesAntonymsSwitch", PAPER[2]) == "Amanda's mother was very ugly."
    assert one("SentenceAdjectivesAntonymsSwitch", "Hello.") == "Hello."


def test_antonym_substitute_changes_an_odd_number():
    for seed in range(6):
        out = one("AntonymSubstitute", PAPER[3], seed=seed)
        changed = [a for a, b in zip(PAPER[3].split(), out.split()) if a != b]
        assert len(changed) % 2 == 1 and set(changed) <= {"able", "beautiful"}


def test_aux_negation_removal_paper_example():
    assert one("SentenceAuxiliaryNegationRemoval", PAPER[1]) == \
        "Ujjal Dev Dosanjh was the 1st Premier of British Columbia from 1871 to 1872."
    assert one("SentenceAuxiliaryNegationRemoval", PAPER[7]) == "He often comes to school."
    assert one("SentenceAuxiliaryNegationRemoval", "I can't swim.") == "I can swim."
    assert one("SentenceAuxiliaryNegationRemoval", PAPER[0]) == PAPER[0]


@pytest.mark.parametrize("name,relation", [("ReplaceHypernyms", "hypernym"), ("ReplaceHyponyms", "hyponym")])
def test_hyper_hyponyms_come_from_wordnet(name, relation):
    out = one(name, "The dog chased the cat.")
    assert out != "The dog chased the cat."
    options = set(lexicon.related_nouns("dog", relation)) | set(lexicon.related_nouns("cat", relation))
    assert any(o in out for o in options)


def test_subject_object_switch():
    assert one("SentenceSubjectObjectSwitch", "John loves the girl.") == "The girl loves John."
    assert one("SentenceSubjectObjectSwitch", "The dog chased the cats.") == "The cats chased the dog."
    assert one("SentenceSubjectObjectSwitch", "She likes them.") == "They like her."
    assert one("SentenceSubjectObjectSwitch", PAPER[0]) == "Europe travelled widely in him."


def test_city_names_uses_gazetteer():
    out = one("CityNamesTransformation", "The king met his wife in London.")
    gaz = lexicon.geonames()
    city = re.match(r"The king met his wife in (.+)\.$", out).group(1)
    assert city != "London" and city in gaz.small_cities
    assert gaz.cities[city]["population"] < gaz.SMALL_CITY


# --------------------------------------------------------------------------- possibly altering

def test_colour_names_and_paper_example():
    names = lexicon.colour_names()
    assert len(names) == 147 and "misty rose" in names and "dark sea green" in names and "burly wood" in names
    out = one("ColorTransformation", PAPER[4])
    new = re.match(r"Tom bought 3 apples, 1 (.+), and 4 bananas and paid \$10\.$", out).group(1)
    assert new in names and new != "orange"


def test_summarization_paper_example():
    assert one("Summarization", PAPER[5]) == "Stillwater !is film"


def test_sentence_reordering_needs_two_sentences():
    assert one("SentenceReordering", "Marie Curie was born in Warsaw. She moved to Paris in 1891.") == \
        "Marie Curie moved to Paris in 1891. Marie Curie was born in Warsaw."
    assert one("SentenceReordering", PAPER[0]) == PAPER[0]


def test_tense_transformation():
    assert one("TenseTransformation", "John loves the girl.") == "John loved the girl."
    assert one("TenseTransformation", PAPER[0]) == "He travels widely in Europe."
    assert one("TenseTransformation", "They were happy.") == "They are happy."


def test_random_word_edits(sentences):
    for text, out in zip(sentences, run("RandomDeletion", sentences)):
        words, kept = text.split(), out.split()
        it = iter(words)
        assert all(w in it for w in kept)  # a subsequence
        assert len(kept) < len(words) or len(words) == 1
    for text, out in zip(sentences, run("RandomCrop", sentences)):
        words, kept = text.split(), out.split()
        n = len(words) - len(kept)
        assert any(words[:i] + words[i + n:] == kept for i in range(len(words) - n + 1))
    for text, out in zip(sentences, run("RandomSwap", sentences)):
        assert sorted(text.split()) == sorted(out.split())
    assert one("RandomSwap", "Hello.") == "Hello."


def test_random_word_augmentation_is_one_of_three(sentences):
    outs = run("RandomWordAugmentation", sentences)
    kinds = set()
    for text, out in zip(sentences, outs):
        if sorted(text.split()) == sorted(out.split()):
            kinds.add("swap")
        elif len(out.split()) < len(text.split()):
            kinds.add("delete/crop")
    assert kinds == {"swap", "delete/crop"}


# --------------------------------------------------------------------------- meaning preserving

def test_yoda_paper_example():
    assert one("YodaPerturbation", "You still have much to learn.") == "Much to learn, you still have."


def test_contractions_both_directions():
    assert one("ContractionExpansions", PAPER[7]) == "He often does not come to school."
    assert one("ContractionExpansions", "He often does not come to school.") == PAPER[7]
    assert one("ContractionExpansions", "I am sure it is fine.") == "I'm sure it's fine."


def test_discourse_markers_keep_sense_and_slot():
    out = one("DiscourseMarkerSubstitution", "She does not like apples, however she eats them.")
    marker = re.match(r"She does not like apples, (.+) she eats them\.$", out).group(1)
    by_marker, by_class = lexicon.discourse_markers()
    assert marker != "however" and marker in by_class["contrast.adv"]
    assert one("DiscourseMarkerSubstitution", PAPER[8]) == PAPER[8]  # "since July" is a preposition
    out = one("DiscourseMarkerSubstitution", "He stayed home because it was raining.")
    assert out in {"He stayed home since it was raining.", "He stayed home inasmuch as it was raining."}


def test_gender_swap():
    assert one("GenderSwap", "The king met his wife in London. He loved her.") == \
        "The queen met her husband in London. She loved him."
    out = one("GenderSwap", "John loves the girl.")
    name = out.split()[0]
    assert out.endswith(" loves the boy.") and name in lexicon.first_names()["female"]


def test_geonames_appends_a_fact():
    out = one("GeoNamesTransformation", "I live in Germany.")
    assert out in {"I live in Germany, whose capital city is Berlin.", "I live in Germany, a country in Europe."} or \
        re.match(r"I live in Germany, a country neighbouring [A-Z][\w ,]+\.$", out)


def test_numeric_to_word_paper_examples():
    assert one("NumericToWord", PAPER[4]) == \
        "Tom bought three apples, one orange, and four bananas and paid ten dollars."
    assert one("NumericToWord", PAPER[1]) == ("Ujjal Dev Dosanjh was not the first Premier of British Columbia "
                                            "from eighteen seventy-one to eighteen seventy-two.")
    assert "thirteen percent" in one("NumericToWord", PAPER[8])


def test_synonyms_are_wordnet_synonyms():
    text = "The children quickly learned the difficult lesson."
    out = one("SynonymSubstitution", text)
    assert out != text
    changed = [(a, b) for a, b in zip(text.rstrip(".").split(), out.rstrip(".").split()) if a != b]
    assert changed


def test_word_repetition_only_duplicates(sentences):
    for text, out in zip(sentences, run("WordRepetition", sentences)):
        words = out.split()
        dedup = [w for i, w in enumerate(words) if i == 0 or w != words[i - 1] or w in text.split()[:0]]
        assert len(words) > len(text.split())
        assert set(dedup) == set(text.split())


# --------------------------------------------------------------------------- SDA

def test_sda_paper_table1():
    s = PAPER[0]
    assert one("PunctuationInsertion", s, variant="paper") == "He, travelled widely in Europe."
    assert re.fullmatch(r"He (must|should|ought to|have to|can't but|can't help to) have travelled widely in Europe\.",
                        one("ModalVerbs", s, variant="paper"))
    assert one("DoubleNegation", s, variant="paper") == "Not that he did not travel widely in Europe."
    dn = one("DoubleNegation", s)
    assert dn.endswith(" he did not travel widely in Europe.") and dn[: -len(" he did not travel widely in Europe.")] \
        in augment.sda.TEMPLATES
    assert one("Negation", s) == "He did not travel widely in Europe."


def test_pi_code_changes_only_punctuation(sentences):
    strip = lambda t: re.sub(r"[,'.;!\s]", "", t)  # noqa: E731
    for text, out in zip(sentences, run("PunctuationInsertion", sentences)):
        assert out != text and strip(out) == strip(text)


def test_pi_subject_comma_goes_after_the_whole_subject():
    # the authors' code misplaces this comma ("A meeting of , promoters"); the rule puts it after the subject
    out = one("PunctuationInsertion", "A meeting of promoters was held in the town.", variant="paper")
    assert out == "A meeting of promoters, was held in the town."


def test_mv_code_rules():
    out = one("ModalVerbs", "It is a beautiful day.")
    modal = "|".join(re.escape(m) for m in augment.sda.MODALS_CODE).replace("have", "(?:have|has)")
    intens = "|".join(augment.sda.INTENSIFIERS)
    assert re.fullmatch(rf"It (?:{modal}) be a beautiful day\.", out) or \
        re.fullmatch(rf"It is a (?:{intens}) beautiful day\.", out)


def test_negation_intended_rules():
    assert one("Negation", "This does not appear often.") == "This does appear often."  # never "not not"
    assert one("Negation", "Not all birds can fly.") != "Not all birds can fly."
    assert one("Negation", "He is here.") == "He is not here."
    assert one("Negation", "List of cities in France.") == "No list of cities in France."
    assert one("Negation", "I can't swim.") == "I can swim."


def test_double_negation_cancels():
    out = one("DoubleNegation", "She does not like apples.")
    assert "not" not in out.split("that", 1)[-1] or out == "She does like apples."


# --------------------------------------------------------------------------- CARDS switch-case

def test_switch_case_v1_count_and_v2_extremes():
    s = PAPER[9]  # CARDS Table 2
    words = s.split()
    out = one("SwitchCase", s, variant="v1", p=0.1).split()
    diffs = [i for i, (a, b) in enumerate(zip(words, out)) if a != b]
    assert len(diffs) == max(1, round(len(words) * 0.1))
    assert all(out[i][0].swapcase() == words[i][0] and out[i][1:] == words[i][1:] for i in diffs)
    assert one("SwitchCase", s, variant="v2", p=0.0) == s
    assert one("SwitchCase", s, variant="v2", p=1.0) == "the Story Of The First Book Continues."


@pytest.fixture(scope="module")
def cased_bpe(tmp_path_factory, wiki):
    """A small cased byte-level BPE tokenizer trained here on real sentences (like RoBERTa's)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(wiki * 3 + PAPER, vocab_size=600, min_frequency=1, show_progress=False)
    out = tmp_path_factory.mktemp("bpe")
    PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer).save_pretrained(out)
    return str(out)


def test_switch_case_modes_need_a_tokenizer(cased_bpe, wiki):
    with pytest.raises(ValueError, match="tokenizer"):
        augment.get("SwitchCase", mode="substitution")
    sub = augment.get("SwitchCase", mode="substitution", tokenizer=cased_bpe, p=1.0)
    for text, out in zip(wiki, sub.apply(wiki)):
        for a, b in zip(text.split(" "), out.split(" ")):
            if a != b:
                assert sub._kind(a, False) == "substitution" or sub._kind(a, True) == "substitution"
    retok = augment.get("SwitchCase", mode="retokenization", tokenizer=cased_bpe, p=1.0)
    assert retok.apply(wiki) == wiki  # the text never changes ...
    tok = retok.tokenizer
    ids = retok.encode(wiki)
    assert all(tok.decode(i) == t for i, t in zip(ids, wiki))  # ... the segmentation does
    assert any(i != tok.encode(t, add_special_tokens=False) for i, t in zip(ids, wiki))


# --------------------------------------------------------------------------- model-based

def test_contextual_word_with_tiny_mlm(tiny_mlm_dir, wiki):
    aug = augment.get("RandomContextualWordAugmentation", model=str(tiny_mlm_dir))
    out = aug.apply(wiki[:8])
    assert out == aug.apply(wiki[:8])
    assert sum(o != s for o, s in zip(out, wiki[:8])) >= 6
    assert all(len(o.split()) == len(s.split()) for o, s in zip(out, wiki[:8]))


def test_word_embedding_neighbours_with_tiny_model(tiny_model_dir, wiki):
    from transformers import AutoTokenizer

    aug = augment.get("RandomWordEmbAugmentation", model=str(tiny_model_dir))
    out = aug.apply(wiki[:8])
    vocab = AutoTokenizer.from_pretrained(tiny_model_dir).get_vocab()
    changed = 0
    for o, s in zip(out, wiki[:8]):
        for a, b in zip(s.split(), o.split()):
            if a != b:
                changed += 1
                assert re.sub(r"[^\w]", "", b).lower() in vocab
    assert changed >= 4


@pytest.mark.parametrize("name", ["DiverseParaphrase", "Casual2Formal", "BackTranslation"])
def test_unavailable_models_fail_clearly(name):
    aug = augment.get(name)
    assert aug.needs and all(n.startswith("model:") for n in aug.needs)
    with pytest.raises(augment.AugmentationError, match="needs model"):
        aug.apply(["A sentence."])
    assert name not in augment.SETS["all-rule-based"]


# --------------------------------------------------------------------------- batch API

def test_augment_batch_parallel_equals_serial(wiki):
    names = ["Negation", "RandomSwap", "SynonymSubstitution"]
    serial = augment.augment_batch(names, wiki[:12], seed=3)
    assert augment.augment_batch(names, wiki[:12], seed=3, n_process=2) == serial
    assert serial["Negation"] == augment.get("Negation").apply(wiki[:12], seed=3)


def test_apply_safe_isolates_a_failing_sentence():
    class Boom(augment.Augmentation):
        name, meaning, rule, source = "Boom", "preserving", "test", "test"

        def rewrite(self, text, rng, doc):
            if "x" in text:
                raise RuntimeError("no x")
            return text.upper()

    out, errors = Boom().apply_safe(["ab", "xy", "cd"])
    assert out == ["AB", "xy", "CD"] and list(errors) == [1] and "no x" in errors[1]


def test_wordnet_substitutions_do_not_depend_on_the_hash_seed(tmp_path):
    """Hypernym/hyponym lists come from NLTK in set order; results must not change across processes."""
    import os
    import subprocess
    import sys

    code = (
        "import json; from augcse.text.augment import augment_batch; "
        "s=['The dog chased the car across the street.','A teacher gave the students a book about birds.',"
        "'The building has a large window and a wooden door.']; "
        "print(json.dumps(augment_batch(['ReplaceHypernyms','ReplaceHyponyms'], s, seed=3)))"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": hash_seed},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for hash_seed in ("1", "2", "3")]
    outputs = set()
    for proc in procs:  # side by side: each process mostly waits on loading spaCy and WordNet
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]
        outputs.add(stdout.strip().splitlines()[-1])
    assert len(outputs) == 1
