"""The statement bank and its labels: what the statement-reading S1 trains and is measured on. Held-out
families stay out of training, no reserved question is anywhere, every label points at a real state."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

import pytest

from soma_local.calibration.recorded import load_all, reserved_questions
from soma_local.engine.monitors import resolve_monitors
from soma_local.errors import DataError
from training.bank.statement_bank import CATEGORIES, FORMS, bank_split, family_of, load_bank
from training.labels.readers import SCALE, BankLabel, read_labels
from training.states.bank_batches import Mix, Texts, _draw, choose_statements, read_states
from training.states.reader_set import training_half


@pytest.fixture(scope="module")
def bank():
    return load_bank()


# The 42 families minilm-statements was trained and measured on: (id, about, held_out, wordings,
# negations) in file order, digested before forms and the new families were added (issue 31). New
# fields may be added to them; these may never change, or the shipped S1 is no longer reproducible.
ORIGINAL_FAMILIES = 42
ORIGINAL_DIGEST = "028e703d19930efded9681d52a174677215f0acb289130d23fc36c9229298706"
ORIGINAL_HELD_OUT = {"self_contradiction", "case_enumeration", "guessing", "backtracking", "unit_conversion", "recalls_formula"}


def test_the_bank_has_many_families_each_with_wordings_and_negations(bank):
    assert len(bank.family) >= 100 and len(bank.held_out) >= 12
    assert sum(len(f.wordings) for f in bank.family) >= 40
    for f in bank.family:
        assert len(f.wordings) >= 2 and len(f.negations) == len(f.wordings)
        assert len(set(f.wordings + f.negations)) == 2 * len(f.wordings), f.id


def test_bank_states_never_come_from_a_reserved_question_and_only_eval_ones_from_replay_s_half(data_dir):
    traces = load_all(data_dir)
    half = training_half((t.dataset, t.answerable, t.question_id) for t in traces)
    reserved = reserved_questions(data_dir)
    states = read_states()
    assert len(states) >= 1500
    for s in states:
        assert s.question_id not in reserved, s.sid
        if s.split == "eval":  # measuring only: the other half, which no S1 trains on
            assert s.question_id not in half, s.sid
        else:
            assert s.question_id in half and s.split == bank_split(s.question_id), s.sid


def test_held_out_families_are_labelled_on_test_and_eval_states_only(bank):
    held = {f.id for f in bank.held_out}
    states = {s.sid: s for s in read_states()}
    labels = read_labels(BankLabel)
    assert len({(r.sid, r.key) for r in labels}) >= 10_000
    for r in labels:
        assert r.p in SCALE
        assert r.key in states[r.sid].statements.values(), (r.sid, r.key)
        if family_of(r.key) in held:
            assert states[r.sid].split in ("test", "eval"), (r.sid, r.key)


def test_a_forms_draw_puts_a_share_of_held_out_families_and_whole_minimal_pairs_on_a_test_state(bank):
    rng = random.Random(0)
    mix = Mix(forms=True, held_out=6, pairs=2, weights={f.id: 5.0 for f in bank.trained[:10]})
    forms = Counter()
    for _ in range(200):
        keys = list(choose_statements(bank, "eval", rng, 12, 0.0, mix=mix).values())
        families = [family_of(k) for k in keys]
        assert len(keys) == 12 and len(set(families)) == 12  # one statement per family
        held = [f for f in families if bank.by_id[f].held_out]
        pairs = [p for p in bank.minimal_pair if p.a in keys and p.b in keys]
        assert len(pairs) >= 2  # two drawn whole; a third only if the forms drawn happen to make one
        assert 6 <= len(held) <= 6 + 4  # six drawn, more only as a minimal pair's side
        for k in keys:
            bank.statement(k)
            forms[k.split(".")[1] if not k.split(".")[1].isdigit() else "not" if k.endswith(".not") else "wording"] += 1
    assert {"wording", "not", "question", "instruction", "label"} <= set(forms)
    train = list(choose_statements(bank, "train", rng, 12, 0.0, mix=mix).values())
    assert not any(bank.by_id[family_of(k)].held_out for k in train)


def test_a_long_share_draw_cuts_that_share_after_the_token_mark():
    cuts = [(100 * i, 200 * i) for i in range(1, 20)]  # (character offset, thinking tokens)
    candidates = [(f"t{n}", cuts, "train") for n in range(30)]
    drawn = _draw(candidates, {"train": 40}, random.Random(0), per_trace=3, long_share=0.75, long_tokens=1000)
    assert len(drawn) == 40
    assert sum(cut >= 500 for _, cut, _ in drawn) == 30  # 1,000 tokens sit at character 500 here
    with pytest.raises(DataError, match="short cuts"):
        _draw(candidates, {"train": 400}, random.Random(0), per_trace=3, long_share=0.5)


def test_every_state_is_rebuilt_from_the_data_directory(data_dir):
    texts = Texts(data_dir)
    for s in read_states()[::50]:
        state = texts.state(s)
        assert state.startswith("Task: ") and "\n\nReasoning so far: " in state


def test_shipped_monitors_speak_the_bank_s_words(bank):
    """looping and off_task use trained statements; guessing's family was held out, so it is read zero-shot."""
    wordings = {w: f for f in bank.family for w in f.wordings}
    looping, off_task, guessing = resolve_monitors(["looping", "off_task", "guessing"])
    assert not wordings[looping.statement].held_out and not wordings[off_task.statement].held_out
    assert wordings[guessing.statement].held_out


def test_the_families_minilm_statements_was_trained_on_are_unchanged(bank):
    original = bank.family[:ORIGINAL_FAMILIES]
    fields = [[f.id, f.about, f.held_out, list(f.wordings), list(f.negations)] for f in original]
    assert hashlib.sha256(json.dumps(fields).encode()).hexdigest() == ORIGINAL_DIGEST
    assert {f.id for f in original if f.held_out} == ORIGINAL_HELD_OUT


def test_held_out_families_span_every_category(bank):
    new_held = [f.id for f in bank.family[ORIGINAL_FAMILIES:] if f.held_out]
    assert len(new_held) >= 6
    held = Counter(f.category for f in bank.held_out)
    trained = Counter(f.category for f in bank.trained)
    for category in CATEGORIES:
        assert held[category] >= 2, category  # zero-shot measured in every category
        assert trained[category] >= 5, category  # and trained in every one too


def test_every_family_has_every_form(bank):
    contrasts = 0
    for f in bank.family:
        assert len(f.wordings) == 4 and len(f.negations) == 4, f.id
        assert f.question.endswith("?") and f.question[0].isupper(), f.id
        assert not f.instruction.endswith("?") and f.instruction[0].isupper(), f.id
        assert 1 <= len(f.label.split()) <= 6 and not f.label.endswith("."), f.id
        assert f.about and f.category in CATEGORIES, f.id
        for name in FORMS:
            if f.form(name) is not None:
                assert bank.statement(f"{f.id}.{name}") == f.form(name)
        if f.contrast is not None:
            contrasts += 1
            assert f.contrast.after in bank.by_id and f.contrast.after != f.id, f.id
            assert ", but " in f.contrast.text, f.id  # the paper's two-part pattern
    assert contrasts >= 20


def test_no_statement_is_shared_and_negations_differ_from_wordings(bank):
    texts = Counter(" ".join(t.lower().split()) for t in bank.statements().values())
    assert [t for t, n in texts.items() if n > 1] == []
    assert len(bank.statements()) == sum(len(f.keys()) for f in bank.family)
    for f in bank.family:
        for w, n in zip(f.wordings, f.negations):
            assert w != n, f.id


def test_minimal_pairs_name_statements_of_two_families(bank):
    assert len(bank.minimal_pair) >= 30
    seen = set()
    for pair in bank.minimal_pair:
        assert bank.statement(pair.a) != bank.statement(pair.b)
        assert family_of(pair.a) != family_of(pair.b) and pair.condition, (pair.a, pair.b)
        assert frozenset((pair.a, pair.b)) not in seen
        seen.add(frozenset((pair.a, pair.b)))
    # most pairs involve a new family, and held-out families take part (measured zero-shot)
    held = {f.id for f in bank.held_out}
    assert sum(family_of(p.a) in held or family_of(p.b) in held for p in bank.minimal_pair) >= 5


def test_statement_keys(bank):
    assert bank.statement("looping.0") == bank.by_id["looping"].wordings[0]
    assert bank.statement("looping.0.not") == bank.by_id["looping"].negations[0]
    assert bank.statement("looping.question") == bank.by_id["looping"].question
    assert bank.statement("looping.contrast") == bank.by_id["looping"].contrast.text
    assert bank.statement("money.label") == bank.by_id["money"].label
    for bad in ("money.contrast", "looping.question.not", "looping.9", "nope.0"):
        with pytest.raises((KeyError, IndexError, ValueError)):
            bank.statement(bad)


def test_statements_fit_the_reader_s_room(bank):
    """Shared reading gives a statement 64 positions; pair reading reserves the longest statement the
    trainer sees (the bank's wordings and negations and the paper monitors'): no new statement may cut
    short or change that reserve, so the shipped S1's training inputs stay as they were."""
    transformers = pytest.importorskip("transformers")
    from soma_local.s1.classifier import SharedStateEncoder
    from soma_local.s1.model_folders import resolve_backbone

    tok = transformers.AutoTokenizer.from_pretrained(str(resolve_backbone("all-minilm-l6-v2")), local_files_only=True)
    length = lambda t: len(tok.encode(t, add_special_tokens=False))
    paper = [m.statement for m in resolve_monitors(["overthinking", "unanswerable"])]
    before = max(length(t) for t in paper + [t for f in bank.family[:ORIGINAL_FAMILIES] for t in f.wordings + f.negations])
    after = max(length(t) for f in bank.family for t in f.wordings + f.negations)
    assert after <= before
    assert max(length(t) for t in bank.statements().values()) <= SharedStateEncoder.STATEMENT_ROOM - 2


def test_a_broken_bank_names_the_family_and_field(tmp_path, bank):
    good = (load_bank.__defaults__[0]).read_text(encoding="utf-8")
    cases = {
        'question = "Is the reasoning going in circles?"\n': ("looping", "question"),
        'category = "behaviour"\nquestion = "Is the reasoning going in circles?"': ("looping", "category"),
        'a = "answer_confirmed.0"\nb = "check_failed.0"': ("minimal_pair", "check_failed.9"),
        'contrast = { after = "answer_stated", text = "An answer has appeared in the reasoning, but it is still repeating': ("looping", "contrast"),
    }
    replacements = {
        'question = "Is the reasoning going in circles?"\n': "",
        'category = "behaviour"\nquestion = "Is the reasoning going in circles?"': 'category = "mood"\nquestion = "Is the reasoning going in circles?"',
        'a = "answer_confirmed.0"\nb = "check_failed.0"': 'a = "answer_confirmed.0"\nb = "check_failed.9"',
        'contrast = { after = "answer_stated", text = "An answer has appeared in the reasoning, but it is still repeating':
            'contrast = { after = "answr_stated", text = "An answer has appeared in the reasoning, but it is still repeating',
    }
    for old, words in cases.items():
        assert good.count(old) == 1, old
        path = tmp_path / "bank.toml"
        path.write_text(good.replace(old, replacements[old]), encoding="utf-8")
        with pytest.raises(DataError) as err:
            load_bank(path)
        for word in words:
            assert word in str(err.value), (old, str(err.value))
