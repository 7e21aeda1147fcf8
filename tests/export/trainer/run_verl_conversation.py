"""Run inside the veRL trainer venv (verl 0.9.1, CPU torch, no envfoundry): play the exported conversation rows with
veRL's own machinery, as a rollout worker would after the README's ``pip install .``:

* the README's conversational ``main_ppo`` overrides are composed with veRL's Hydra config (``ppo_trainer``);
* ``agent_loop.yaml`` is read as ``AgentLoopWorker`` reads ``agent.agent_loop_config_path`` and the loop is made
  by ``hydra.utils.instantiate`` with the worker's arguments (the tools from ``tool_config.yaml`` by
  ``load_all_tools``), then ``run`` plays each row of ``train_conversation.parquet`` / ``val_conversation.parquet``
  from its raw prompt, ``extra_info``, ``tools_kwargs`` and ``interaction_kwargs``: veRL's tokenization
  (Continuous Token), hermes tool parser, tool dispatch and turn limits;
* the LLM server is a stand-in: it decodes the prompt tokens (a byte-level tokenizer with the Qwen2.5 chat
  template), asks the scripted OpenAI-compatible agent endpoint (model = the task id) and returns its reply
  (hermes tool calls) as tokens; the simulated user runs on its own endpoint (``ENVFOUNDRY_USER_*``);
* the reward comes from ``compute_score`` (``pkg://<package>.tools``) through veRL's ``NaiveRewardManager``.

Prints one JSON report."""

import asyncio
import json
import re
import sys
import urllib.request
from pathlib import Path

import hydra
import pyarrow.parquet as pq
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from run_verl import score
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.tools.tool_registry import load_all_tools
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>", re.S)
CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)
RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)


def messages_of(text):
    """The chat messages a Qwen2.5-format prompt holds (tool calls and responses as OpenAI messages)."""
    out = []
    for role, content in TURN.findall(text):
        if role == "system":
            continue
        if role == "user" and RESPONSE.search(content):
            out += [{"role": "tool", "content": r} for r in RESPONSE.findall(content)]
        elif role == "assistant":
            calls = [json.loads(c) for c in CALL.findall(content)]
            msg = {"role": "assistant", "content": CALL.sub("", content).strip()}
            if calls:
                msg["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {
                    "name": c["name"], "arguments": json.dumps(c["arguments"])}} for i, c in enumerate(calls)]
            out.append(msg)
        else:
            out.append({"role": role, "content": content})
    return out


class ScriptedLLM:
    """The rollout server's ``generate``, answered by a scripted OpenAI-compatible endpoint over the decoded prompt."""

    def __init__(self, tokenizer, base_url, model):
        self.tokenizer, self.base_url, self.model, self.calls = tokenizer, base_url, model, 0

    def _chat(self, messages):
        body = json.dumps({"model": self.model, "messages": messages}).encode()
        request = urllib.request.Request(self.base_url + "/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            return json.loads(r.read())["choices"][0]["message"]

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        self.calls += 1
        reply = await asyncio.to_thread(self._chat, messages_of(self.tokenizer.decode(prompt_ids)))
        text = reply.get("content") or ""
        for call in reply.get("tool_calls") or []:
            fn = call["function"]
            text += "<tool_call>\n" + json.dumps({"name": fn["name"], "arguments": json.loads(fn["arguments"])}) + \
                "\n</tool_call>"
        ids = self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, num_preempted=0)


def readme_config(root):
    readme = (root / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    (block,) = [b for b in blocks if "agent_loop_config_path" in b]
    command = next(x for x in block.replace("\\\n", " ").splitlines() if "verl.trainer.main_ppo" in x)
    overrides = [t for t in command.split("verl.trainer.main_ppo", 1)[1].split() if "=" in t]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=[
            *overrides, "actor_rollout_ref.rollout.prompt_length=65536",
            "actor_rollout_ref.rollout.response_length=65536",
            # the scripted agent reads whole tool results (veRL cuts them at 256 characters by default)
            "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=100000"])
    return overrides, cfg


async def main(export_dir, package, tokenizer_dir, agent_url):
    root = Path(export_dir)
    overrides, cfg = readme_config(root)
    rollout = cfg.actor_rollout_ref.rollout
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    entries = OmegaConf.load(root / rollout.agent.agent_loop_config_path)  # as AgentLoopWorker reads it
    registry = {e.name: e for e in entries}
    tools = load_all_tools(tool_config_path=str(root / rollout.multi_turn.tool_config_path), function_tool_path=None)
    reward_cfg = OmegaConf.create({"reward": {"custom_reward_function": dict(cfg.reward.custom_reward_function)}})
    manager = NaiveRewardManager(reward_cfg, tokenizer, get_custom_reward_fn(reward_cfg))
    report = {"overrides": overrides, "train_files": cfg.data.train_files, "val_files": cfg.data.val_files,
              "agent_loops": sorted(registry), "rollouts": []}
    for part in (cfg.data.train_files, cfg.data.val_files):
        for row in pq.read_table(root / part).to_pylist():
            extra = row["extra_info"]
            llm = ScriptedLLM(tokenizer, agent_url, extra["task_id"])
            loop = hydra.utils.instantiate(
                config=registry[row["agent_name"]], trainer_config=DictConfigWrap(config=cfg), server_manager=llm,
                tokenizer=tokenizer, processor=None, hf_model_type=None, dataset_cls=RLHFDataset,
                data_config=DictConfigWrap(cfg.data), tools=ToolListWrap(tools))
            output = await loop.run({}, raw_prompt=list(row["prompt"]), extra_info=extra,
                                    tools_kwargs=extra["tools_kwargs"], interaction_kwargs=extra["interaction_kwargs"])
            text = tokenizer.decode(output.response_ids)
            data = type("AgentData", (), {"extra_fields": output.extra_fields,
                                          "messages": [None] * output.num_turns})()
            result = await score(manager, row, dict(extra), data, text, tokenizer)
            report["rollouts"].append({
                "task_id": extra["task_id"], "split": extra["split"], "loop": type(loop).__name__,
                "llm_calls": llm.calls, "num_turns": output.num_turns, "reward": result["reward_score"],
                "extra": result["reward_extra_info"], "text": text[-1500:], "user_masked": "It is " in text and 0 in output.response_mask,
            })
    return report


if __name__ == "__main__":
    print("REPORT " + json.dumps(asyncio.run(main(*sys.argv[1:5])), default=str))
