"""Numbers read aloud: one scanner over the sentence text for every numeric expression NumericToWord spells.

The scanner is a single regular expression whose alternatives are tried in priority order at each
position (a phone number before a range, a date before a fraction, an amount with its currency before
a bare number). Each alternative has a reader that returns the words; the text between matches is
kept as it was, and a unit glued to a number (``300mg``, ``6pm``) gets a space. Numbers inside
codes and names (``N2O``, ``F-16``, ``4x4``, ``978-3-16-148410-0``) are left alone. Only a bare
four-digit number needs the parse: whether it reads as a year is decided by the caller.
"""

from __future__ import annotations

import re
from typing import Callable

from num2words import num2words

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
_MONTH_WORD = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
               r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
# Currency marks: (singular, plural, hundredth singular, hundredth plural or None when not read as cents).
CURRENCIES: dict[str, tuple[str, str, str | None, str | None]] = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "US$": ("US dollar", "US dollars", "cent", "cents"),
    "USD": ("US dollar", "US dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "EUR": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "GBP": ("pound sterling", "pounds sterling", "penny", "pence"),
    "¥": ("yen", "yen", None, None),
    "JPY": ("yen", "yen", None, None),
    "₹": ("rupee", "rupees", None, None),
    "INR": ("rupee", "rupees", None, None),
}
CENT = ("cent", "cents")
MAGNITUDES = {"k": "thousand", "thousand": "thousand", "m": "million", "mn": "million", "million": "million",
              "bn": "billion", "b": "billion", "billion": "billion", "tn": "trillion", "trillion": "trillion"}
SIGNS = {"-": "minus", "−": "minus", "+": "plus"}
DENOMINATORS = {2: ("half", "halves"), 4: ("quarter", "quarters")}

_CUR_PRE = r"US\$|USD|EUR|GBP|JPY|INR|[$€£¥₹]"
_CUR_POST = r"US\$|USD|EUR|GBP|JPY|INR|[$€£¥₹¢]"
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_MAG = r"bn|mn|tn|[kmb](?![A-Za-z])|(?:\s(?:thousand|million|billion|trillion))"
_START = r"(?<![A-Za-z0-9.,])(?<![A-Z]-)"

PATTERN = re.compile("|".join([
    # codes and identifiers: several separated digit groups, or digits mixed into letters
    rf"{_START}(?P<code>\d+(?:[-./]\d+){{3,}}|\d+\.\d+\.\d+|\d+[A-Za-z]+\d[A-Za-z0-9]*)",
    # phone numbers
    r"(?P<phone>(?<![\w])\(?\+\d[\d\s()-]{5,}\d(?!\d)"
    rf"|{_START}\(\d{{3}}\)\s?\d{{3}}[-.\s]\d{{4}}(?!\d)"
    rf"|{_START}\d{{3}}[-.]\d{{3}}[-.]\d{{4}}(?!\d)"
    rf"|{_START}0\d{{2,4}}-\d{{5,8}}(?!\d))",
    # dates: 14/07/2021, 07.14.21, 2021-07-14
    rf"{_START}(?P<ymd>(?P<y0>\d{{4}})(?P<s0>[-/.])(?P<m0>\d{{1,2}})(?P=s0)(?P<d0>\d{{1,2}}))(?![\d.]\d)",
    rf"{_START}(?P<dmy>(?P<a1>\d{{1,2}})(?P<s1>[-/.])(?P<b1>\d{{1,2}})(?P=s1)(?P<y1>\d{{4}}|\d{{2}}))(?![\d.]\d)",
    # clock times with am/pm (6pm, 6:30 p.m.) and 24-hour times (23:00), ratios (1:1)
    rf"{_START}(?P<ampm>(?P<h2>\d{{1,2}})(?:[:.](?P<m2>\d{{2}}))?\s?(?P<sfx>[AaPp]\.?[Mm]\.?)(?![A-Za-z]))",
    rf"{_START}(?P<clock>(?P<h3>\d{{1,2}}):(?P<m3>\d{{2}}))(?![\d:])",
    rf"{_START}(?P<ratio>(?P<r1>\d+):(?P<r2>\d+))(?![\d:])",
    # currency before the amount: $10, USD300.2, $44.7m, $5 million, $.2
    rf"(?<![A-Za-z0-9])(?P<money>(?P<cur1>{_CUR_PRE})\s?(?P<amt1>{_NUM})(?P<mag1>{_MAG})?)(?![\d])",
    # ranges: 20-30, 5–14 (each end read on its own)
    rf"{_START}(?P<range>(?P<lo>{_NUM})\s?[-–]\s?(?P<hi>{_NUM}))(?![\d]|[-–.]\d)",
    # fractions: 4/6
    rf"{_START}(?P<frac>(?P<num>\d+)/(?P<den>\d+))(?![\d/])",
    # decades: 1990s, 80s
    rf"{_START}(?P<decade>(?P<dec>\d{{1,3}}0)s)(?![A-Za-z])",
    # ordinals: 1st, 22nd
    rf"{_START}(?P<ordinal>(?P<ord>\d+)(?:st|nd|rd|th))(?![A-Za-z])",
    # a number, with an optional comparison before it, a sign, and what follows it:
    # a currency mark (300.2USD, 2¢), %, degrees, or a unit glued to it (300mg, 3x)
    rf"(?P<number>(?P<op>\s?[=<>≤≥]\s?)?(?P<sign>(?<![\w.)])[-+−])?{_START}(?P<amt>{_NUM})"
    rf"(?:(?P<cur2>{_CUR_POST})(?![A-Za-z])|(?P<pct>\s?%)|(?P<deg>\s?°\s?[CF]?)|(?P<unit>[A-Za-z]+))?)(?![\d])",
]))


def integer_words(digits: str) -> str:
    """An integer as words; a leading zero or more than twelve digits reads digit by digit (codes, IDs)."""
    digits = digits.replace(",", "")
    if len(digits) > 1 and digits[0] == "0" or len(digits) > 12:
        return digit_words(digits)
    return num2words(int(digits)).replace(",", "")


def digit_words(digits: str) -> str:
    return " ".join(num2words(int(ch)) for ch in digits if ch.isdigit())


def number_words(number: str) -> str:
    """'1,234.05' -> 'one thousand two hundred and thirty-four point zero five'; '.5' -> 'point five'."""
    whole, _, frac = number.replace(",", "").partition(".")
    words = integer_words(whole) if whole else ""
    if frac:
        words = f"{words} point {digit_words(frac)}".strip()
    return words


def year_words(year: str) -> str:
    return num2words(int(year), to="year") if len(year) == 4 else integer_words(year)


def ordinal_words(n: int) -> str:
    return num2words(n, to="ordinal")


def _plural_of(words: str) -> str:
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def _amount_with_unit(amount: str, unit: tuple[str, str, str | None, str | None], magnitude: str = "") -> str:
    """'10' $ -> 'ten dollars'; '3.50' $ -> 'three dollars and fifty cents'; '44.7' $ 'million' -> ..."""
    one, many, cent_one, cent_many = unit
    whole, _, frac = amount.replace(",", "").partition(".")
    if magnitude:
        return f"{number_words(amount)} {magnitude} {many}"
    if len(frac) == 2 and cent_many is not None:
        cents = int(frac)
        parts = [] if not whole or int(whole) == 0 and cents else \
            [f"{integer_words(whole)} {one if int(whole) == 1 else many}"]
        if cents:
            parts.append(f"{integer_words(str(cents))} {cent_one if cents == 1 else cent_many}")
        return " and ".join(parts)
    return f"{number_words(amount)} {one if amount in ('1', '1.0') else many}"


def _clock(hour: int, minute: int, suffix: str = "") -> str | None:
    """Spoken time: '9:45' -> 'nine forty-five', '23:00' -> 'eleven pm', '10:00' -> "ten o'clock"."""
    if hour > 23 or minute > 59 or suffix and not 0 < hour <= 12:
        return None
    if not suffix and hour > 12:
        hour, suffix = hour - 12, "pm"
    elif not suffix and hour == 0:
        hour, suffix = 12, "am"
    words = num2words(hour)
    if minute:
        words += " " + ("oh " if minute < 10 else "") + num2words(minute)
    elif not suffix:
        words += " o'clock"
    return f"{words} {suffix}" if suffix else words


def _date(day: int, month: int, year: str) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"the {ordinal_words(day)} of {MONTHS[month - 1]} {year_words(year)}"


def _read_dmy(m: re.Match) -> str | None:
    """Day/month when the first number cannot be a month, else month/day (the US order)."""
    a, b = int(m["a1"]), int(m["b1"])
    day, month = (a, b) if a > 12 else (b, a)
    return _date(day, month, m["y1"])


def _read_number(m: re.Match, text: str) -> str | None:
    amount = m["amt"]
    words = number_words(amount)
    if m["sign"]:
        words = f"{SIGNS[m['sign']]} {words}"
    if m["cur2"]:
        unit = CURRENCIES.get(m["cur2"]) or (*CENT, None, None)
        words = (f"{SIGNS[m['sign']]} " if m["sign"] else "") + _amount_with_unit(amount, unit)
    elif m["pct"]:
        words += " percent"
    elif m["deg"]:
        scale = m["deg"].strip()[-1:]
        words += " degree" if amount == "1" else " degrees"
        words += {"C": " Celsius", "F": " Fahrenheit"}.get(scale, "")
    elif m["unit"]:
        words += " " + m["unit"]
    if m["op"]:
        words = f" {m['op'].strip()} {words}"
    return words


def _read_day_of_month(m: re.Match, text: str) -> str | None:
    """A day number right before or after a month name reads as an ordinal ('25 December' -> 'the
    twenty-fifth of December'; 'June 5' -> 'June fifth')."""
    if m["sign"] or m["op"] or m["unit"] or m["cur2"] or m["pct"] or m["deg"] or not m["amt"].isdigit():
        return None
    day = int(m["amt"])
    if not 1 <= day <= 31:
        return None
    if re.match(rf"\s{_MONTH_WORD}(?![A-Za-z])", text[m.end():]):
        before = text[:m.start()].rstrip().lower()
        return ordinal_words(day) + " of" if re.search(r"\bthe$", before) else f"the {ordinal_words(day)} of"
    if re.search(rf"(?<![A-Za-z]){_MONTH_WORD}\s$", text[:m.start()]):
        return ordinal_words(day)
    return None


def _read_range(m: re.Match, text: str) -> str:
    lo, hi = m["lo"], m["hi"]
    if lo.isdigit() and len(lo) == 4 and 1100 <= int(lo) < 2100 and hi.isdigit() and len(hi) in (2, 4):
        return f"{year_words(lo)} to {year_words(hi)}"
    return f"{number_words(lo)} to {number_words(hi)}"


def _read_fraction(m: re.Match, text: str) -> str:
    num, den = int(m["num"]), int(m["den"])
    if not 2 <= den <= 10:
        return f"{integer_words(m['num'])} over {integer_words(m['den'])}"
    one, many = DENOMINATORS.get(den) or (ordinal_words(den), ordinal_words(den) + "s")
    return f"{integer_words(m['num'])} {one if num == 1 else many}"


def _read_phone(m: re.Match, text: str) -> str:
    body = m["phone"]
    return ("plus " if "+" in body else "") + digit_words(body)


def _read_money(m: re.Match, text: str) -> str:
    magnitude = MAGNITUDES[m["mag1"].strip().lower()] if m["mag1"] else ""
    return _amount_with_unit(m["amt1"], CURRENCIES[m["cur1"]], magnitude)


def _read_ratio(m: re.Match, text: str, left: str = "r1", right: str = "r2") -> str:
    return f"{integer_words(m[left])} to {integer_words(m[right])}"


READERS: dict[str, Callable[[re.Match, str], str | None]] = {
    "code": lambda m, text: None,
    "phone": _read_phone,
    "ymd": lambda m, text: _date(int(m["d0"]), int(m["m0"]), m["y0"]),
    "dmy": lambda m, text: _read_dmy(m),
    "ampm": lambda m, text: _clock(int(m["h2"]), int(m["m2"] or 0), m["sfx"]),
    "clock": lambda m, text: _clock(int(m["h3"]), int(m["m3"])) or _read_ratio(m, text, "h3", "m3"),
    "ratio": _read_ratio,
    "money": _read_money,
    "range": _read_range,
    "frac": _read_fraction,
    "decade": lambda m, text: _plural_of(num2words(int(m["dec"]), to="year") if len(m["dec"]) == 4
                                         else num2words(int(m["dec"]))),
    "ordinal": lambda m, text: ordinal_words(int(m["ord"])),
    "number": lambda m, text: _read_day_of_month(m, text) or _read_number(m, text),
}


def spell_numbers(text: str, is_year: Callable[[int, int], bool]) -> str | None:
    """``text`` with every numeric expression read aloud, or None when nothing was spelled.

    ``is_year(start, end)`` says whether the bare four-digit number at those character offsets is
    a year ('1871' -> 'eighteen seventy-one' rather than 'one thousand eight hundred and seventy-one').
    """
    out, last = [], 0
    for m in PATTERN.finditer(text):
        kind = next(k for k in READERS if m.group(k) is not None)
        if kind == "number" and not (m["sign"] or m["op"] or m["unit"] or m["cur2"] or m["pct"] or m["deg"]) \
                and re.fullmatch(r"\d{4}", m["amt"]) and is_year(m.start("amt"), m.end("amt")) \
                and not _read_day_of_month(m, text):
            words = year_words(m["amt"])
        else:
            words = READERS[kind](m, text)
        if not words:
            continue
        start, end = m.span()
        before = text[last:start]
        if words.startswith(" "):  # an operator read with spaces around it ('p=0.005' -> 'p = ...')
            words = words.lstrip()
            glue = before[-1:] and not before[-1:].isspace()
        else:
            glue = before[-1:].isalnum()
        out.extend([before, " " if glue else "", words])
        if text[end:end + 1].isalnum():
            out.append(" ")
        last = end
    if last == 0:
        return None
    out.append(text[last:])
    return "".join(out)
