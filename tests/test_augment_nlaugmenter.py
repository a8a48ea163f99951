"""Golden input -> output cases for the augmentations named after NL-Augmenter transformations.

Each case is written for this library (not copied from NL-Augmenter's test files): numbers read aloud
with their units, signs, currencies, dates, ranges, phone numbers and times; the subject/object switch
with the auxiliary agreeing with the new subject; GeoNames facts in NL-Augmenter's wording and format.
"""

from __future__ import annotations

import re

import pytest

from augcse.text import augment
from augcse.text.augment.lexicon import geonames
from augcse.text.augment.numbers import spell_numbers


def apply(name, sentences, seed=0):
    return augment.get(name).apply(sentences, seed, augment.parse(sentences))


NUMBERS = [
    # units glued to the number get a space, never a glued word
    ("Dinner is at 6pm.", "Dinner is at six pm."),
    ("Take 300mg twice a day.", "Take three hundred mg twice a day."),
    ("The firm raised $44.7m in May.", "The firm raised forty-four point seven million dollars in May."),
    ("It costs $5 million.", "It costs five million dollars."),
    # signed numbers and bare decimals
    ("The change was -0.5 overall.", "The change was minus zero point five overall."),
    ("Sales rose +56 % this year.", "Sales rose plus fifty-six percent this year."),
    ("The P value was .137 only.", "The P value was point one three seven only."),
    # numbers attached to other characters
    ("Solve 3x for me.", "Solve three x for me."),
    ("The effect was small (p=0.005).", "The effect was small (p = zero point zero zero five)."),
    ("Those aged<70 years were fine.", "Those aged < seventy years were fine."),
    # currencies after the number, cents
    ("The price is 300.2USD today.", "The price is three hundred point two US dollars today."),
    ("The stamp cost 2¢ then.", "The stamp cost two cents then."),
    ("A ticket is $3.50 or $1.", "A ticket is three dollars and fifty cents or one dollar."),
    # dates, day numbers, years
    ("We met on 14/07/2021 in Paris.", "We met on the fourteenth of July twenty twenty-one in Paris."),
    ("It is due 07/14/2021 at noon.", "It is due the fourteenth of July twenty twenty-one at noon."),
    ("It opened on 2021-07-14 downtown.", "It opened on the fourteenth of July twenty twenty-one downtown."),
    ("Dinner is on 25 December 2021.", "Dinner is on the twenty-fifth of December twenty twenty-one."),
    ("Set it for June 5 please.", "Set it for June fifth please."),
    ("He was not the 1st Premier from 1871 to 1872.",
     "He was not the first Premier from eighteen seventy-one to eighteen seventy-two."),
    ("Music of the 1990s and the 80s.", "Music of the nineteen nineties and the eighties."),
    # fractions and ranges
    ("About 4/6 of them agreed.", "About four sixths of them agreed."),
    ("Only 1/2 of it is left.", "Only one half of it is left."),
    ("It will be between 20-30F in Alhambra.", "It will be between twenty to thirty F in Alhambra."),
    ("Children aged 5-14 years were seen.", "Children aged five to fourteen years were seen."),
    ("It ran from 2004-2007 in total.", "It ran from two thousand and four to two thousand and seven in total."),
    # phone numbers read digit by digit
    ("Call 555-123-4567 now.", "Call five five five one two three four five six seven now."),
    ("Call +1 555 123 4567 now.", "Call plus one five five five one two three four five six seven now."),
    ("Dial 0741-71893178 today.", "Dial zero seven four one seven one eight nine three one seven eight today."),
    # times and ratios
    ("It is already 23:00 here.", "It is already eleven pm here."),
    ("The bus leaves at 9:45 daily.", "The bus leaves at nine forty-five daily."),
    ("The bus leaves at 9:05 daily.", "The bus leaves at nine oh five daily."),
    ("Meet me at 10:00 sharp.", "Meet me at ten o'clock sharp."),
    ("They were randomized (1:1) to two arms.", "They were randomized (one to one) to two arms."),
    # percent, degrees, thousands, sentence start
    ("It has plunged 13% since July.", "It has plunged thirteen percent since July."),
    ("It was 25°C outside.", "It was twenty-five degrees Celsius outside."),
    ("The hall seats 12,235 people.", "The hall seats twelve thousand two hundred and thirty-five people."),
    ("30-day mortality was low.", "Thirty-day mortality was low."),
    # codes and names keep their digits
    ("COVID-19 grounded the F-16 near N2O tanks.", "COVID-19 grounded the F-16 near N2O tanks."),
    ("Use ISBN 978-3-16-148410-0 or version 3.2.1 of the 4x4 model.",
     "Use ISBN 978-3-16-148410-0 or version 3.2.1 of the 4x4 model."),
]


def test_numeric_to_word_golden_cases():
    inputs = [i for i, _ in NUMBERS]
    got = apply("NumericToWord", inputs)
    wrong = [(i, g, e) for (i, e), g in zip(NUMBERS, got) if g != e]
    assert not wrong, "\n".join(f"{i!r}\n  got      {g!r}\n  expected {e!r}" for i, g, e in wrong)


def test_numeric_to_word_leaves_no_digit_in_plain_numbers():
    """The rule says every numeric expression is spelled out: no digit survives outside codes."""
    out = apply("NumericToWord", ["Between 1200 and 1,500 people paid $3, or 2.5% of 40,000."])[0]
    assert not re.search(r"\d", out), out


def test_spell_numbers_asks_the_parse_only_about_four_digit_years():
    asked = []

    def is_year(start, end):
        asked.append((start, end))
        return True

    assert spell_numbers("In 1871 there were 25 people.", is_year) == \
        "In eighteen seventy-one there were twenty-five people."
    assert asked == [(3, 7)]
    assert spell_numbers("No numbers here.", is_year) is None


SWITCH = [
    ("She has eaten the apples.", "The apples have eaten her."),
    ("She has not eaten the apples.", "The apples have not eaten her."),
    ("The boys are watching the film.", "The film is watching the boys."),
    ("The apples were eating him.", "He was eating the apples."),
    ("I am eating the apples.", "The apples are eating me."),
    ("The cats have seen me.", "I have seen the cats."),
    ("He doesn't like the cats.", "The cats don't like him."),
    ("You were helping the man.", "The man was helping you."),
    ("She likes them.", "They like her."),
    ("The dog chased the cats.", "The cats chased the dog."),
    # no direct object: the first prepositional object after the verb, as NL-Augmenter does
    ("He travelled widely in Europe.", "Europe travelled widely in him."),
    ("The cake was eaten by her.", "She was eaten by the cake."),
    ("John Locke and Adam Smith were born before Karl Marx.", "Karl Marx was born before John Locke and Adam Smith."),
]


@pytest.mark.parametrize("sentence,expected", SWITCH)
def test_subject_object_switch_agreement(sentence, expected):
    assert apply("SentenceSubjectObjectSwitch", [sentence])[0] == expected


def test_geonames_format_and_facts():
    """NL-Augmenter's format: ', <fact>,' inside the sentence, ', <fact>' before the final punctuation."""
    inside = [apply("GeoNamesTransformation", ["Egypt has many pyramids."], seed)[0] for seed in range(8)]
    assert all(re.fullmatch(r"Egypt, [^,]+(?:, [^,]+)*, has many pyramids\.", o) for o in inside), inside
    end = {apply("GeoNamesTransformation", ["I live in Germany."], seed)[0] for seed in range(12)}
    assert "I live in Germany, a country in Europe." in end
    assert "I live in Germany, whose capital city is Berlin." in end
    assert any(o.startswith("I live in Germany, a country neighbouring ") for o in end)
    assert all("(" not in o for o in end)


def test_geonames_city_facts_have_no_population_floor():
    """Cities of any size in the gazetteer get a fact (NL-Augmenter: GeoNames cities of 5,000+)."""
    gaz = geonames()
    assert gaz.cities["Mangalia"]["population"] < 100_000
    outs = {apply("GeoNamesTransformation", ["She moved to Mangalia last year."], s)[0] for s in range(6)}
    assert "She moved to Mangalia, a city in Romania, last year." in outs


def test_geonames_skips_facts_already_in_the_sentence():
    outs = {apply("GeoNamesTransformation", ["Romania and Hungary signed a treaty."], s)[0] for s in range(12)}
    assert outs and all("neighbouring" not in o or "Hungary, and" not in o.split("neighbouring")[1] for o in outs)
    assert all(o.count("Hungary") == 1 for o in outs)


def test_city_names_replaces_nl_augmenter_test_cities():
    outs = apply("CityNamesTransformation", ["The team was established in Dallas in 1898.",
                                             "She flew from Boston last night."])
    assert "Dallas" not in outs[0] and outs[0].endswith(" in 1898.")
    assert "Boston" not in outs[1] and outs[1].endswith(" last night.")
