"""The model card written next to a released S1: what it reads, where its labels came from, its figures."""

from __future__ import annotations

from soma_local.s1.model_folders import S1ModelConfig

LABEL_SOURCES = {
    "rules": (
        "Rule labels over each trace's structure (`training/labels/rules.py`), no model and no human: "
        "overthinking = the trace's final answer has appeared twice in the thinking so far (reached and "
        "restated) and a re-check phrase follows (0.9; restated without re-check 0.65; seen once 0.3; not "
        "yet 0.05); unanswerable = a doubt about missing or contradictory information has been voiced "
        "and an assumption or another attempt at a definite answer follows it (0.9; doubt only 0.65; no "
        "doubt 0.05)."
    ),
    "reader": (
        "Reader labels (`training/data/reader_labels.jsonl`, references only): a strong general LLM reader "
        "followed `s1_labels/LABELLING.md`, the rubric gold was made with, word for word, one reader per "
        "state, reading each state whole and seeing no other label; p on the rubric's 7-point scale. "
        "States were drawn by `python -m training.states.reader_batches` from the training half of the questions "
        "(`training/states/reader_set.py`), never from a reserved question."
    ),
}


def _table(section: dict) -> str:
    rows = ["| monitor | n | pos | AUROC | ECE before | ECE after | Brier before | Brier after |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in section.items():
        b, a = m["before"], m["after"]
        rows.append(f"| {name} | {a['n']} | {a['positives']} | {a['auroc']:.3f} | {b['ece']:.3f} | {a['ece']:.3f} | {b['brier']:.3f} | {a['brier']:.3f} |")
    return "\n".join(rows)


def model_card(name: str, config: S1ModelConfig, metrics: dict, data: dict) -> str:
    teacher = data["teacher"]
    source = LABEL_SOURCES.get(teacher, f"Teacher `{teacher}` (soft probabilities as labels).")
    gold = metrics.get("gold_dev")
    gold_part = (
        "## Gold set (`s1_labels/gold_dev.jsonl`, strong LLM reader; never trained on, T not fitted on it)\n\n"
        + _table(gold) + "\n" if gold else "No gold set was present at training time.\n"
    )
    statements = "\n".join(f"- **{k}**: {v}" for k, v in config.statements.items())
    tuned = bool(config.encoder_weights)
    what = (f"A `{config.backbone}` cross-encoder, fine-tuned end to end with its head ({data.get('epochs', '?')} epochs), reads"
            if tuned else f"A frozen `{config.backbone}` cross-encoder reads")
    ships = (f"The fine-tuned backbone weights ship here (`{config.encoder_weights}`, half precision) with the head "
             "(`head.safetensors`); the tokenizer and architecture are read from the backbone's local package."
             if tuned else "Only the head ships here (`head.safetensors`); the backbone is read from its local package.")
    module = "training.s1.finetune" if tuned else "training.s1.train"
    reproduce = f"`python -m {module} {' '.join(data['argv'])}`"
    if data.get("encoder_argv") not in (None, data["argv"]):
        reproduce = (f"`python -m {module} {' '.join(data['encoder_argv'])}` (trains the encoder and fits everything "
                     f"else); this folder's T and cue heads were refit over that encoder by {reproduce}")
    cues = ""
    if config.cue_heads:
        cues = f"""
## Text cues beside the encoder

For {', '.join(f'`{m}`' for m in config.cue_heads)}, the S1 state is up to {config.state_limit} tokens: the encoder
reads its newest {config.max_length}, and a linear cue head reads it all, as counts of phrases (re-checks,
doubts, assumptions, concerns, giving up, restated results) over the whole reasoning window and its newest
2,000 / 1,000 / 500 characters (`soma_local/s1/cues.py`, set `{next(iter(config.cue_heads.values())).cue_set}`).
The cue weights were fitted on the training split; on the held-out split, which the encoder never
saw, a two-input logistic regression set how much the encoder's logit and the cue logit count and
calibrated their sum (so T does not rescale these monitors again). Held-out figures of the joined S1
are cross-validated over held-out questions (5 folds), not those of the fit itself:

{_table(metrics['held_out_s1'])}
"""
        if "gold_dev_encoder" in metrics:
            cues += f"\nThe encoder alone, on the gold set:\n\n{_table(metrics['gold_dev_encoder'])}\n"
    return f"""# S1 model `{name}`

{what} `[statement] [SEP] Task: Q / Reasoning so far: H`
(at most {config.max_length} backbone tokens; the task is kept whole and the oldest reasoning dropped)
and a {'linear' if config.head_hidden == 0 else f'{config.head_hidden}-unit MLP'} head over
[mean-pooled last layer, first token] returns one logit z; p = sigmoid(z / T), T = {config.temperature:.3f}.
{ships}

## Training data

- States: cut from the traces ({', '.join(data['traces'])}) at the engine's scan schedule (pause after
  256 thinking tokens at the next line break, or 128 tokens later), tokens counted with the embedded
  S2 tokenizer; {data.get('drawn', 'at most a few states per trace and monitor, drawn with a fixed seed')}.
- {data['excluded'] if 'excluded' in data else f"Questions that any gold file draws from were removed before sampling ({data['excluded_questions']} questions)"}.
- Split by question: {data['train']} training states ({data['positives_train']} with label >= 0.5),
  {data['held_out']} held-out states (temperature fitted here).
- **Label source**: {source}
- Monitor statements trained on:
{statements}

## Held-out split (same label source; T fitted here){' : the encoder alone' if config.cue_heads else ''}

{_table(metrics['held_out'])}
{cues}
{gold_part}
{f"Head sizes tried (best held-out NLL ships): {metrics['candidates']}." if 'candidates' in metrics else ''}

Reproduce: {reproduce}
"""


READINGS = {
    "pair": "A cross-encoder pass per (statement, state).",
    "shared": ("Shared reading (`config.json`: `reading = shared`): the state is encoded once, its tokens attending "
               "only to each other, and each statement's tokens attend to themselves and to the state, so all the "
               "monitors of a pause cost about one state encoding."),
    "chunked": ("Whole-state reading (`config.json`: `reading = chunked`, `soma_local/s1/chunked.py`): the task and "
                "the reasoning, in chunks of {chunk} tokens aligned to the reasoning's start, are encoded one chunk at a "
                "time by the frozen encoder named above (each chunk's tokens attend only to their chunk), and each "
                "statement's tokens attend at every layer to every chunk through the statement side's own layers, "
                "with a learned vector for each chunk's age (the task, the newest chunk, the one before, ...). "
                "A chunk's encodings are kept by content, so a scan re-encodes only the newest chunk or two; the "
                "window is the newest whole chunks that fit {limit} tokens."),
}

TRAINERS = {"chunked": "training.s1.whole_state"}  # which module trained a reading's S1 (default: statement_reader)


def statement_card(name: str, config: S1ModelConfig, metrics: dict) -> str:
    """The card of a statement-reading S1 (``training.s1.statement_reader``): what it reads, its data, every figure."""
    from training.bank.evaluate import family_table, form_table, pooled_table

    data, m = metrics.get("data", {}), metrics["measured"]
    speed = metrics.get("throughput", {})
    neg = m["eval"].get("negation", {})
    mid = m["eval"]["middle"]
    gold = m.get("gold_dev", {}).get("families", {})
    argv = " ".join(data.get("argv", []))
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    alone = (metrics.get("gold_dev_encoder") or {}).get("families", {})
    cues = ""
    if config.cue_heads:
        cues = (f" with the cue heads of {', '.join(f'`{m}`' for m in config.cue_heads)} (phrase counts over the whole "
                f"{config.state_limit}-token state, `soma_local/s1/cues.py`, fitted on the train split's reader labels and "
                f"joined to the encoder on dev; they apply to those two exact statements only); the encoder alone: "
                + ", ".join(f"{k} {fmt(v['auroc'])}" for k, v in alone.items()))
    span = f"{data['steps']} steps" if data.get("steps") else f"{data.get('epochs', '?')} epochs"
    stages = "".join(f" It went on from a model trained earlier on {st.get('pairs', '?')} pairs in {st.get('minutes', '?')} min "
                     f"({st.get('seconds_per_pair', '?')} s per pair)." for st in speed.get("earlier_stages", []))
    trainer = TRAINERS.get(config.reading, "training.s1.statement_reader")
    reading = READINGS[config.reading].format(chunk=config.chunk_tokens, limit=config.max_length)
    weights = (f"The statement side ships in `{config.reader_weights}` (half precision) with `head.safetensors`; the state "
               f"side is the frozen encoder `{config.encoder_weights}`, shared with the model it was built from"
               if config.reading == "chunked" else
               f"The fine-tuned weights ship in `{config.encoder_weights}` (half precision) with `head.safetensors`")
    return f"""# S1 model `{name}`: reads any statement

A `{config.backbone}` encoder, fine-tuned with a linear head, reads
`[statement] [SEP] Task: Q / Reasoning so far: H` (at most {config.max_length} backbone tokens; the task is
kept whole and the oldest reasoning dropped) and returns one logit z; p = sigmoid(z / T), T = {config.temperature:.3f}
(fitted on `dev` pairs of trained families). {reading} Every statement is read the same way;
the only monitor-specific part is the cue heads below, if any. {weights}.

## Training data

Reader labels of (state, statement) pairs (`training/data/bank_labels.jsonl`, general rubric
`training/data/GENERAL_RUBRIC.md`) over {data.get('families', '?')} statement families of `training/data/statement_bank.toml`,
plus the paper monitors' reader labels (`training/data/reader_labels.jsonl`, gold rubric): {data.get('train_pairs', '?')}
training pairs (a share shown each epoch in another wording of their family or as its negation),
{data.get('dev_pairs', '?')} dev pairs, {span} from `{data.get('init', '?')}`. States come from the training
half of the shared traces' questions and from runs of the embedded S2s, never a reserved question.
Held-out families, never trained on, never used for T or any choice:
{', '.join(f'`{f}`' for f in data.get('held_out_families', []))}.

{data['note'].capitalize() + '.' if data.get('note') else ''}
Training throughput: {speed.get('seconds_per_pair', '?')} s per labelled pair ({speed.get('pairs', '?')} pairs in
{speed.get('minutes', '?')} min, {speed.get('threads', '?')} threads on {speed.get('device', '?')}, bf16 autocast {speed.get('bf16', '?')}).{stages}

## Figures (as it ships, through the S1 interface)

`test`: states of the training half's test questions; `eval`: states of the other half (the half replay
reports on), on which no S1 was trained or tuned.

{pooled_table({k: v for k, v in m.items() if k != 'gold_dev'})}

A statement and its negation (eval, each scored apart): mean |p(s) + p(not s) - 1| = {fmt(neg.get('mean_abs_gap'))}
(trained families {fmt(neg.get('trained'))}, held-out {fmt(neg.get('held_out'))}; {neg.get('n', 0)} pairs).
Two wordings of one family (eval): mean |p(w1) - p(w2)| = {fmt(m['eval'].get('wording', {}).get('mean_abs_gap'))}.
Does p leave the middle (eval): median p {fmt(mid['median_p_reader_ge_0.8'])} on pairs the readers put at >= 0.8
({mid['n_high']}), {fmt(mid['median_p_reader_le_0.2'])} on pairs at <= 0.2 ({mid['n_low']}).

Gold (`s1_labels/gold_dev.jsonl`, measured only) AUROC: {', '.join(f'{k} {fmt(v["auroc"])}' for k, v in gold.items()) or 'not measured'}{cues}.

Minimal pairs (eval; two statements that differ in one condition, on states where the readers put them on
opposite sides of 0.5): ordered as the readers did in {fmt(m['eval'].get('minimal_pairs', {}).get('ordered'))} of
{m['eval'].get('minimal_pairs', {}).get('n', 0)}.

### Per form (AUROC, pairs, positives)

{form_table({'test': m['test'], 'eval': m['eval']})}

### Per family (AUROC, pairs, positives)

{family_table({'test': m['test'], 'eval': m['eval']})}

Reproduce: `python -m {trainer} {argv}`; figures alone: `python -m {trainer} --name {name} --measure-only`
or `python -m benchmarks.s1_statements --s1 classifier:{name}`.
"""
