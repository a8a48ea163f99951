from augcse.core.names import suggest


def test_case_and_separator_insensitive():
    assert suggest("randomswap", ["RandomSwap", "RandomDeletion"]) == " (did you mean 'RandomSwap'?)"
    assert "'STSB'" in suggest("sts-b", ["STSB", "SICKR"])


def test_close_typo_and_nothing_close():
    assert "'simcse'" in suggest("simcsee", ["simcse", "augcse", "sda"])
    assert suggest("zzzz", ["simcse", "augcse"]) == ""


def test_a_name_cut_short_suggests_the_full_names_first():
    tasks = ["STS12", "STS16", "STSBenchmark", "STSBenchmark-dev", "sts"]
    assert suggest("STSB", tasks) == " (did you mean 'STSBenchmark' or 'STSBenchmark-dev'?)"
    assert suggest("ST", ["STS12", "STS13"]) == ""  # two letters are too short to stand for a name
