"""Run inside the veRL trainer venv (verl 0.9.1 on CPU torch, no envfoundry): drive the exported
tool/reward package through veRL's own pieces, as a veRL worker would after the README's
``pip install .``:

* the tools are built by ``verl.tools.tool_registry.initialize_tools_from_config`` from
  ``tool_config.yaml``; each row's ``extra_info.tool_selection`` picks the active tools as
  ``ToolAgentLoop.run`` does;
* each model turn is parsed by veRL's tool parser (``hermes`` or ``qwen3_coder``), the assistant
  message built by ``ToolAgentLoop._build_assistant_message`` and every call dispatched by
  ``ToolAgentLoop._call_tool`` (create / execute with the trajectory's ``AgentData`` / release);
* every trajectory uses the request id ``det-0`` (what ``full_determinism`` gives every step),
  and two trajectories of one task also run interleaved;
* the reward comes from veRL's ``NaiveRewardManager.run_single`` with ``compute_score`` loaded by
  ``get_custom_reward_fn`` from ``reward.custom_reward_function.path=pkg://<package>.tools``, the
  agent loop's ``extra_fields`` passed as ``tool_extra_fields`` and one ``extra_info`` dict shared
  by the rollouts of a prompt (as a repeated batch shares it);
* the README's ``main_ppo`` overrides are composed with veRL's own Hydra config (``ppo_trainer``):
  a key veRL does not have fails the composition.

The model's text is scripted (the reference solution, or nothing), and the tokenizer is a byte
stand-in (token ids are UTF-8 bytes): no LLM server and no GPU run here. Prints one JSON report.
"""

import asyncio
import json
import re
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.tools.tool_registry import initialize_tools_from_config
from verl.trainer.ppo.reward import get_custom_reward_fn

SPECIAL = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
REQUEST_ID = "det-0"


class ByteTokenizer:
    """Token ids are the UTF-8 bytes of the text; special tokens are dropped when asked."""

    pad_token = "<|endoftext|>"

    def encode(self, text, add_special_tokens=False):
        return list(text.encode("utf-8"))

    def decode(self, ids, skip_special_tokens=False):
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        text = bytes(int(i) for i in ids).decode("utf-8")
        if skip_special_tokens:
            for s in SPECIAL:
                text = text.replace(s, "")
        return text


def hermes_call(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def qwen3_coder_call(name, arguments):
    params = "".join(
        f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n" for k, v in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


CALL_FORMATS = {"hermes": hermes_call, "qwen3_coder": qwen3_coder_call}


def make_loop(tools, fmt, tokenizer):
    loop = ToolAgentLoop.__new__(ToolAgentLoop)  # the dispatch methods only, without an LLM server
    loop.tools = {t.name: t for t in tools}
    loop.tool_schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools]
    loop.tool_parser = ToolParser.get_tool_parser(fmt, tokenizer)
    loop.max_parallel_calls = 1
    loop.max_tool_response_length = 100_000
    loop.tool_response_truncate_side = "middle"
    return loop


async def trajectory(loop, row, turns, tokenizer):
    """Play scripted assistant turns through the loop's parser and dispatch; (agent_data, text)."""
    extra = row["extra_info"]
    agent_data = AgentData(
        messages=list(row["prompt"]), image_data=None, video_data=None, audio_data=None,
        mm_processor_kwargs=None, metrics={}, request_id=REQUEST_ID, tools_kwargs=extra["tools_kwargs"],
    )
    selected = {n: loop.tools[n] for n in extra["tool_selection"] if n in loop.tools}
    agent_data._active_tools = selected
    schemas = [t.tool_schema for t in selected.values()]
    text = ""
    results = []
    for turn in turns:
        content, calls = await loop.tool_parser.extract_tool_calls(tokenizer.encode(turn), schemas)
        agent_data.tool_calls = calls
        agent_data.messages.append(loop._build_assistant_message(content, agent_data))
        text += turn + "<|im_end|>"
        if not calls:
            break
        for call in calls:
            response, _, _ = await loop._call_tool(call, agent_data.tools_kwargs, agent_data)
            results.append(response.text)
            agent_data.messages.append({"role": "tool", "content": response.text or ""})
            text += f"\n<|im_start|>user\n<tool_response>\n{response.text}\n</tool_response><|im_end|>\n"
        text += "<|im_start|>assistant\n"
        await asyncio.sleep(0)  # let an interleaved trajectory run its turn here
    return agent_data, text, results


async def score(manager, row, shared_extra_info, agent_data, text, tokenizer):
    prompt_ids = tokenizer.encode("<|im_start|>user\n" + row["prompt"][-1]["content"] + "<|im_end|>\n")
    response_ids = tokenizer.encode(text)
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt_ids]),
            "responses": torch.tensor([response_ids]),
            "attention_mask": torch.ones(1, len(prompt_ids) + len(response_ids), dtype=torch.long),
        },
        non_tensors={
            "data_source": np.array([row["data_source"]], dtype=object),
            "reward_model": np.array([row["reward_model"]], dtype=object),
            "extra_info": np.array([shared_extra_info], dtype=object),
            "tool_extra_fields": np.array([agent_data.extra_fields], dtype=object),
            "__num_turns__": np.array([len(agent_data.messages)], dtype=np.int32),
        },
    )
    return await manager.run_single(data)


def readme_config(readme: Path) -> dict:
    """Compose veRL's trainer config with the README command's overrides, as main_ppo would."""
    block = re.search(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.S).group(1)
    command = next(line for line in block.replace("\\\n", " ").splitlines() if "verl.trainer.main_ppo" in line)
    overrides = [t for t in command.split("verl.trainer.main_ppo", 1)[1].split() if "=" in t]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    return {
        "overrides": overrides,
        "train_files": cfg.data.train_files,
        "val_files": cfg.data.val_files,
        "tool_config_path": cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path,
        "reward_path": cfg.reward.custom_reward_function.path,
        "reward_name": cfg.reward.custom_reward_function.name,
    }


async def main(export_dir: str, package: str, script_file: str, fmt: str) -> dict:
    root = Path(export_dir)
    script = json.loads(Path(script_file).read_text(encoding="utf-8"))
    tokenizer = ByteTokenizer()
    tools = initialize_tools_from_config(str(root / "tool_config.yaml"))
    config = OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": f"pkg://{package}.tools", "name": "compute_score"}}}
    )
    manager = NaiveRewardManager(config, tokenizer, get_custom_reward_fn(config))
    tools_module = sys.modules[f"{package}.tools"]
    loop = make_loop(tools, fmt, tokenizer)
    make_call = CALL_FORMATS[fmt]
    rows = [r for split in ("train", "val") for r in pq.read_table(root / f"{split}.parquet").to_pylist()]
    report = {"format": fmt, "tools": sorted(loop.tools), "rollouts": [], "leaks": [],
              "readme_config": readme_config(root / "README.md")}

    def check_leaks(where):
        held = {"open_databases": tools_module.open_databases(), "live_handles": tools_module.live_handles()}
        if any(held.values()):
            report["leaks"].append({"where": where, **held})

    for row in rows:
        extra = row["extra_info"]
        s = script[extra["task_id"]]
        # The model calls the tools by the names it is shown (qualified when two environments share one).
        shown = {n.split("__")[-1]: n for n in extra["tool_selection"]}
        reference = [make_call(shown[c["tool"]], c["arguments"]) for c in s["calls"]] + [s["reply"] or "Done."]
        shared = dict(extra)  # one extra_info dict for this prompt's rollouts, as a repeated batch has
        # Reference twice in a row with the same request id (step 1, step 2 of full_determinism),
        # then reference and no-op interleaved, then a no-op alone.
        plan = [("reference", reference), ("reference", reference)]
        for mode, turns in plan:
            agent_data, text, results = await trajectory(loop, row, turns, tokenizer)
            check_leaks(f"{extra['task_id']} {mode}")
            result = await score(manager, row, shared, agent_data, text, tokenizer)
            report["rollouts"].append({"task_id": extra["task_id"], "env_id": extra["env_id"], "mode": mode,
                                       "split": extra["split"], "reward": result["reward_score"],
                                       "extra": result["reward_extra_info"], "results": results})
        (ref, ref_text, ref_results), (noop, noop_text, _) = await asyncio.gather(
            trajectory(loop, row, reference, tokenizer), trajectory(loop, row, ["I cannot help with that."], tokenizer)
        )
        check_leaks(f"{extra['task_id']} interleaved")
        for mode, agent_data, text, results in (("reference-interleaved", ref, ref_text, ref_results),
                                                ("noop-interleaved", noop, noop_text, [])):
            result = await score(manager, row, shared, agent_data, text, tokenizer)
            report["rollouts"].append({"task_id": extra["task_id"], "env_id": extra["env_id"], "mode": mode,
                                       "split": extra["split"], "reward": result["reward_score"],
                                       "extra": result["reward_extra_info"], "results": results})
        agent_data, text, _ = await trajectory(loop, row, ["Nothing to do."], tokenizer)
        result = await score(manager, row, shared, agent_data, text, tokenizer)
        report["rollouts"].append({"task_id": extra["task_id"], "env_id": extra["env_id"], "mode": "noop",
                                   "split": extra["split"], "reward": result["reward_score"],
                                   "extra": result["reward_extra_info"], "results": []})
    if fmt == "hermes":  # arguments the model wrote as a JSON string: refused with a message, not run as {}
        row = rows[0]
        name = row["extra_info"]["tool_selection"][0]
        turn = "<tool_call>\n" + json.dumps({"name": name, "arguments": "a string"}) + "\n</tool_call>"
        _, _, results = await trajectory(loop, row, [turn, "Done."], tokenizer)
        report["string_arguments"] = {"tool": name, "results": results}
    check_leaks("end")
    return report


if __name__ == "__main__":
    out = asyncio.run(main(*sys.argv[1:5]))
    print("REPORT " + json.dumps(out, default=str))
