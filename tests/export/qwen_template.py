"""A local tokenizer directory carrying the real Qwen2.5 chat template, for rendering tests.

The template is read from the embedded model's GGUF metadata (``tokenizer.chat_template``, read by
llama.cpp with ``vocab_only``); ``tokenizer_config.json`` carries it, as a Hugging Face model repo
does, so ``AutoTokenizer.from_pretrained(<dir>).apply_chat_template`` renders with it. The
vocabulary is a tiny word-level one (rendering to text does not tokenize).
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def qwen_chat_template() -> str:
    from llama_cpp import Llama

    from pipeline.llm.embedded import ensure_model

    llm = Llama(model_path=str(ensure_model("qwen2.5-coder-1.5b")), vocab_only=True, verbose=False)
    template = llm.metadata.get("tokenizer.chat_template")
    assert template and "<tool_call>" in template, "the embedded model's GGUF carries no tool-calling chat template"
    return template


def write_tokenizer_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    added = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}
        for i, t in enumerate(SPECIAL)
    ]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {**{t: i for i, t in enumerate(SPECIAL)}, "[UNK]": len(SPECIAL)},
                  "unk_token": "[UNK]"},
    }
    (path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": qwen_chat_template(),
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 32768,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character map (what a byte-level BPE vocabulary is written in)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def write_byte_tokenizer_dir(path: Path) -> Path:
    """A tokenizer directory with the Qwen2.5 chat template whose vocabulary is the 256 bytes (byte-level BPE, no
    merges) plus the special tokens: any text encodes and decodes back exactly, so an agent loop can run on it."""
    write_tokenizer_dir(path)
    added = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}
        for i, t in enumerate(SPECIAL)
    ]
    vocab = {**{t: i for i, t in enumerate(SPECIAL)}, **{c: len(SPECIAL) + b for b, c in _bytes_to_unicode().items()}}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": []},
    }
    (path / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    return path
