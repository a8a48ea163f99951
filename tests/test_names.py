from augcse.names import suggest


def test_case_and_separator_insensitive():
    assert suggest("randomswap", ["RandomSwap", "RandomDeletion"]) == " (did you mean 'RandomSwap'?)"
    assert "'STSB'" in suggest("sts-b", ["STSB", "SICKR"])


def test_close_typo_and_nothing_close():
    assert "'simcse'" in suggest("simcsee", ["simcse", "augcse", "sda"])
    assert suggest("zzzz", ["simcse", "augcse"]) == ""
