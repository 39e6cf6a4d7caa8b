from soma_local.calibration.scoring import after_thinking, boxed_contents, extract_answer, grade, is_abstention


def test_abstention_rule():
    assert is_abstention("\\boxed{I don't know.} Reason{missing}")
    assert is_abstention("I don’t know what the last term is.")
    assert is_abstention("\\boxed{\\text{I don't know}}")
    assert not is_abstention("The answer is \\boxed{42}.")
    assert not is_abstention("We know that x = 3, so \\boxed{3}")


def test_boxed_and_extraction():
    assert boxed_contents("a \\boxed{\\frac{1}{2}} b \\boxed{3}") == ["\\frac{1}{2}", "3"]
    assert extract_answer("so \\boxed{\\frac{243}{625}}.") == "\\frac{243}{625}"
    assert extract_answer("Thus the final answer is 14.") == "14"
    assert extract_answer("no answer here") is None


def test_grade_with_math_verify():
    assert grade("\\frac{243}{625}", "\\dfrac{243}{625}")
    assert grade("0.5", "\\frac{1}{2}")
    assert grade("15", "15")
    assert not grade("15", "16")
    assert not grade("15", None)


def test_after_thinking():
    assert after_thinking("<think>x</think>\n\n\\boxed{1}") == "\n\n\\boxed{1}"
    assert after_thinking("<think>never closed") is None
