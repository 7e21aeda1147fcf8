"""Render envfoundry's SFT transcripts (sft.jsonl) through a model's chat template.

    pip install transformers jinja2
    python render_sft.py sft.jsonl --tokenizer Qwen/Qwen2.5-7B-Instruct --out rendered.jsonl

``--tokenizer`` is anything ``AutoTokenizer.from_pretrained`` takes (a hub id or a local
directory). Each line of ``sft.jsonl`` is rendered with
``tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)``; the output has one
``{"task_id", "env_id", "split", "tier", "pass_rate", "text"}`` per line, ready for any trainer that
takes plain text. Lines are read with ``json`` (not an Arrow-backed loader, which would merge the
tool-call ``arguments`` objects of all lines into one struct and add null keys). ``--split train``
keeps one split.
"""

import argparse
import json
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sft", help="the exported sft.jsonl")
    parser.add_argument("--tokenizer", required=True, help="hub id or local directory of the model's tokenizer")
    parser.add_argument("--out", help="write the rendered texts here (JSON lines); default: standard output")
    parser.add_argument("--split", choices=["train", "val"], help="keep only this split")
    args = parser.parse_args(argv)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
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
