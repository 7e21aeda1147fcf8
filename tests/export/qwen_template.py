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
