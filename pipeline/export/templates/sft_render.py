"""Render envfoundry's SFT transcripts (sft.jsonl) through a model's chat template.

    pip install transformers jinja2
    python render_sft.py sft.jsonl --tokenizer ./qwen2.5-tokenizer --out rendered.jsonl

``--tokenizer`` is a local directory holding the model's tokenizer files (``tokenizer_config.json``
with its ``chat_template``, ``tokenizer.json``), read without any network access, or a Hugging Face
Hub id (``Qwen/Qwen2.5-7B-Instruct``), downloaded or read from the Hub cache (``HF_HUB_OFFLINE=1``:
the cache only). Each line of ``sft.jsonl`` is rendered with
``tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)``; the output has one
``{"task_id", "env_id", "split", "tier", "pass_rate", "text"}`` per line, ready for any trainer that
takes plain text. Lines are read with ``json`` (not an Arrow-backed loader, which would merge the
tool-call ``arguments`` objects of all lines into one struct and add null keys). ``--split train``
keeps one split.
"""

import argparse
import json
import os
import sys

OFFLINE_HINT = (
    "to render offline, pass a local directory holding the tokenizer files, made once on a machine with "
    "network: `hf download Qwen/Qwen2.5-7B-Instruct tokenizer.json tokenizer_config.json --local-dir "
    "qwen2.5-tokenizer` (or `AutoTokenizer.from_pretrained(ID).save_pretrained(DIR)`), then "
    "`--tokenizer ./qwen2.5-tokenizer`"
)


def load_tokenizer(name):
    """The tokenizer of a local directory (files only, no network) or of a Hub id; a SystemExit that
    says what to do when it cannot be loaded or has no chat template."""
    from transformers import AutoTokenizer

    path = os.path.expanduser(name)
    local = os.path.isdir(path)
    if not local and (name.startswith((".", "/", "~")) or name.count("/") > 1):  # a path, not an org/name id
        raise SystemExit(f"--tokenizer {name}: no such directory ({OFFLINE_HINT})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path if local else name, local_files_only=local)
    except (OSError, ValueError) as exc:
        where = "the directory" if local else "the Hugging Face Hub (or its cache)"
        raise SystemExit(f"--tokenizer {name}: cannot load a tokenizer from {where}: {exc}\n{OFFLINE_HINT}") from exc
    if not getattr(tokenizer, "chat_template", None):
        raise SystemExit(f"--tokenizer {name}: the tokenizer has no chat template (tokenizer_config.json "
                         "`chat_template`, or chat_template.jinja): use the chat model's tokenizer")
    return tokenizer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sft", help="the exported sft.jsonl")
    parser.add_argument("--tokenizer", required=True,
                        help="local directory of the model's tokenizer files (offline), or a Hugging Face Hub id")
    parser.add_argument("--out", help="write the rendered texts here (JSON lines); default: standard output")
    parser.add_argument("--split", choices=["train", "val"], help="keep only this split")
    args = parser.parse_args(argv)

    tokenizer = load_tokenizer(args.tokenizer)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    n = 0
    try:
        with open(args.sft, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                rec = json.loads(line)
                if args.split and rec.get("split") != args.split:
                    continue
                try:
                    text = tokenizer.apply_chat_template(rec["messages"], tools=rec.get("tools"), tokenize=False)
                except Exception as exc:
                    raise SystemExit(f"{args.sft}:{lineno}: task {rec.get('task_id')}: cannot render: {exc}") from exc
                keep = ("task_id", "env_id", "split", "tier", "pass_rate")
                out.write(json.dumps({**{k: rec.get(k) for k in keep}, "text": text}, ensure_ascii=False) + "\n")
                n += 1
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"rendered {n} transcripts with the chat template of {args.tokenizer}", file=sys.stderr)


if __name__ == "__main__":
    main()
