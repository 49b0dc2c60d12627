"""Load a transformers causal LM and its tokenizer: HF id, local folder, GGUF, or the
embedded ``smollm2-135m``.

Shared by the ``hf:`` backend, training and the P3 benchmark, so that "the same model"
means the same weights and the same tokenizer everywhere.

Why an export cache: transformers can read the embedded Q4_1 GGUF (``gguf_file=``), but
it dequantizes all 272 tensors on every load (tens of seconds on a small CPU). We do it
once, ``save_pretrained`` the result under ``cache_dir()/smollm2-135m-hf``, and key it by
the GGUF's SHA-256, so a new GGUF invalidates it. The weights are the dequantized Q4_1
values, so they match what llama.cpp computes with, up to float arithmetic.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from userturn import assets
from userturn.errors import UserError, missing_extra

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

EMBEDDED = "smollm2-135m"
_SHA_FILE = "gguf.sha256"
_DTYPES = ("float32", "float16", "bfloat16", "auto")


def _transformers() -> Any:
    try:
        import transformers
    except ModuleNotFoundError as exc:
        raise missing_extra("hf", exc.name or "transformers") from exc
    if not sys.stderr.isatty():
        # A progress bar is for a person at a terminal; in a log file or CI it is a
        # screenful of carriage returns per model load.
        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return transformers


def embedded_export(name: str = EMBEDDED) -> Path:
    """The HF-format export of a named model's GGUF (``assets.MODELS``), built on first use."""
    gguf = assets.fetch_model(name)
    sha = assets.model_sha(name)
    target = assets.cache_dir() / f"{name}-hf"
    marker = target / _SHA_FILE
    if marker.is_file() and marker.read_text().strip() == sha:
        return target
    log.info("exporting %s to HF format at %s (once per GGUF)", gguf.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        staged = Path(tmp) / "export"
        model, tok = _load_gguf(gguf)
        model.save_pretrained(staged)
        tok.save_pretrained(staged)
        (staged / _SHA_FILE).write_text(sha + "\n")
        if target.exists():  # stale export (other sha) or a concurrent builder won
            if (target / _SHA_FILE).is_file() and (target / _SHA_FILE).read_text().strip() == sha:
                return target
            shutil.rmtree(target)
        staged.rename(target)  # atomic: a killed export never leaves a half folder
    return target


def _load_gguf(gguf: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Dequantize a GGUF through transformers; keep its chat template on the tokenizer."""
    tf = _transformers()
    tok = tf.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not tok.chat_template:
        tok.chat_template = _gguf_chat_template(gguf)
    model = tf.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    _drop_gguf_quantizer(model)
    return model, tok


def _drop_gguf_quantizer(model: PreTrainedModel) -> None:
    """Make a dequantized GGUF model saveable as a plain checkpoint.

    transformers marks every GGUF-loaded model as quantized and refuses to save it, even
    when (no GGUF kernels installed) every tensor was unpacked to float. Only then is
    dropping the marker safe; packed ``GgufLinear`` layers would be saved as garbage.
    """
    packed = [n for n, m in model.named_modules() if "Gguf" in type(m).__name__]
    if packed or any(not p.dtype.is_floating_point for p in model.parameters()):
        raise UserError(
            f"transformers kept {len(packed)} GGUF layers packed; cannot export "
            "(uninstall `kernels` or load the GGUF directly)"
        )
    setattr(model, "hf_quantizer", None)  # noqa: B010 - typed as a module attribute
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def _gguf_chat_template(gguf: Path) -> str | None:
    try:
        from gguf import GGUFReader
    except ModuleNotFoundError as exc:
        raise missing_extra("hf", "gguf") from exc
    field = GGUFReader(str(gguf)).get_field("tokenizer.chat_template")
    if field is None:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def resolve_source(spec_target: str) -> tuple[str, str | None]:
    """(folder or hub id, gguf file name or None) for a spec target."""
    if spec_target in assets.MODELS:
        return str(embedded_export(spec_target)), None
    path = Path(spec_target).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise UserError("GGUF file not found", file=spec_target, field="model")
        return str(path.parent), path.name
    if path.exists() and not path.is_dir():
        raise UserError(
            "expected a model folder, a .gguf file or a hub id", file=spec_target, field="model"
        )
    return (str(path) if path.is_dir() else spec_target), None


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _torch_dtype(dtype: str | None, device: str) -> Any:
    import torch

    if dtype is None:  # float32 on CPU (half is slow there), the checkpoint's own on GPU
        return torch.float32 if device == "cpu" else "auto"
    if dtype not in _DTYPES:
        raise UserError(f"unknown dtype {dtype!r} (known: {', '.join(_DTYPES)})", field="dtype")
    return dtype if dtype == "auto" else getattr(torch, dtype)


def load_tokenizer(spec_target: str) -> PreTrainedTokenizerBase:
    """The tokenizer alone (fast: no weights), with its chat template and a pad token."""
    tf = _transformers()
    source, gguf_file = resolve_source(spec_target)
    try:
        tok = tf.AutoTokenizer.from_pretrained(
            source, **({"gguf_file": gguf_file} if gguf_file else {})
        )
    except OSError as exc:
        raise UserError(
            f"cannot load tokenizer: {exc}".splitlines()[0], file=spec_target, field="model"
        ) from exc
    if gguf_file and not tok.chat_template:
        tok.chat_template = _gguf_chat_template(Path(source) / gguf_file)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return cast("PreTrainedTokenizerBase", tok)


def template_parts(tok: PreTrainedTokenizerBase, name: str) -> tuple[str, str, str, str]:
    """``Backend.builtin_template`` for anything tokenized by an HF tokenizer (hf, vllm):
    its own chat template and the text of its BOS and EOS tokens."""
    source = tok.chat_template
    if isinstance(source, dict):  # named templates: the default one is the chat one
        source = source.get("default")
    if not source:
        raise UserError("this tokenizer has no chat template; pass --chat-template FILE", file=name)
    return (
        str(source),
        f"{name}#tokenizer.chat_template",
        str(tok.bos_token or ""),
        str(tok.eos_token or ""),
    )


def load_hf(
    spec_target: str,
    *,
    adapter: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A causal LM in eval mode and its tokenizer (pad token set, padding side untouched).

    ``device="auto"`` shards the model over all GPUs with accelerate's ``device_map``;
    otherwise it is moved to ``device`` (default: cuda if available, else cpu).
    ``adapter`` is a PEFT LoRA folder applied on top (not merged, so it stays inspectable).
    """
    tf = _transformers()
    tok = load_tokenizer(spec_target)
    source, gguf_file = resolve_source(spec_target)
    device = device or default_device()
    kwargs: dict[str, Any] = {"dtype": _torch_dtype(dtype, "cpu" if device == "cpu" else "gpu")}
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
    if device == "auto":
        kwargs["device_map"] = "auto"
    try:
        model = tf.AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except OSError as exc:
        raise UserError(
            f"cannot load transformers model: {exc}".splitlines()[0],
            file=spec_target,
            field="model",
        ) from exc
    if device != "auto":
        model = model.to(device)
    if adapter:
        model = _with_adapter(model, adapter)
    model.eval()
    return model, tok


def _with_adapter(model: PreTrainedModel, adapter: str) -> PreTrainedModel:
    try:
        from peft import PeftModel
    except ModuleNotFoundError as exc:
        raise missing_extra("hf", "peft") from exc
    if not (Path(adapter) / "adapter_config.json").is_file():
        raise UserError(
            "not a PEFT adapter folder (no adapter_config.json)", file=adapter, field="adapter"
        )
    # A PeftModel forwards every PreTrainedModel attribute (generate, config, ...).
    return cast("PreTrainedModel", PeftModel.from_pretrained(model, adapter))


def model_revision(spec_target: str, adapter: str | None = None) -> str:
    """A stable id of the weights for record keys and the manifest.

    The embedded model: its GGUF SHA-256. A GGUF file: its SHA-256. A hub snapshot
    folder: its commit (the folder name). Another folder: SHA-256 over its config and
    the names and sizes of its files (hashing hundreds of GB of weights per run is not
    worth it). An adapter adds the SHA-256 of its weights, which are small.
    """
    rev = _base_revision(spec_target)
    if adapter:
        h = hashlib.sha256(rev.encode())
        for f in sorted(Path(adapter).glob("adapter_model.*")):
            h.update(assets.file_sha256(f).encode())
        rev = f"{rev}+adapter:{h.hexdigest()[:16]}"
    return rev


def _base_revision(spec_target: str) -> str:
    if spec_target in assets.MODELS:
        return assets.model_sha(spec_target)
    path = Path(spec_target).expanduser()
    if path.is_file():
        return assets.file_sha256(path)
    if not path.is_dir():
        return ""  # a hub id: the hub resolves the revision; record the id only
    if path.parent.name == "snapshots":
        return path.name
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(path)}:{f.stat().st_size}\n".encode())
        if f.suffix in (".json", ".jinja", ".txt"):
            h.update(f.read_bytes())
    return "files:" + h.hexdigest()
