"""envfoundry conversations for veRL (0.9.x): the tool agent loop with a simulated user.

veRL 0.9 removed its interaction interface (``verl/interactions``, ``BaseInteraction``,
``multi_turn.interaction_config_path``); a conversation is now an agent loop, registered by name and chosen per row
by ``agent_name``. ``EnvFoundryConversationLoop`` is veRL's ``ToolAgentLoop`` whose environment answers a reply
without tool calls: the simulated user (``usersim.py``, envfoundry's user on any OpenAI-compatible endpoint)
replies, its message goes into the context as a ``user`` turn (masked out of the loss, as tool results are), and
generation resumes, until the user ends the conversation (``###STOP###``) or its replies run out. Tool calls still
go to the tools (``tools.py``: the trajectory's own database).

``agent_loop.yaml`` (``actor_rollout_ref.rollout.agent.agent_loop_config_path``) registers it as
``envfoundry_conversation`` and names the user's endpoint: ``user_base_url``, ``user_model``, ``user_api_key_var``
(the variable holding its key), ``user_temperature``, ``user_max_turns``; a value left null is read from
``ENVFOUNDRY_USER_BASE_URL``, ``ENVFOUNDRY_USER_MODEL``, ... . The conversation rows
(``train_conversation.parquet``, ``val_conversation.parquet``) have ``agent_name: envfoundry_conversation``, the
user's opening line as their prompt and ``extra_info.interaction_kwargs`` (``task_id``, ``env_id``: the task whose
script the user plays, read from the package's data).

The reward is unchanged (``tools.compute_score``): the trajectory's final database and its last assistant message
(the agent's last message to the user). The user's side is recorded with the trajectory's envfoundry record
(``extra_fields["extras"]["envfoundry"]["user"]``), so ``compute_score`` also returns ``user_turns`` and
``user_errors`` (the user's mistakes caught by code, ``usercheck.py``), apart from the score.
"""

import asyncio
import os

from verl.experimental.agent_loop.tool_agent_loop import AgentState, ToolAgentLoop

from . import tools, usersim  # type: ignore[attr-defined]  # siblings in the exported package

AGENT_NAME = "envfoundry_conversation"


class EnvFoundryConversationLoop(ToolAgentLoop):
    def __init__(self, *args, user_base_url=None, user_model=None, user_api_key_var="ENVFOUNDRY_USER_API_KEY",
                 user_temperature=None, user_max_turns=None, **kwargs):
        kwargs.pop("name", None)  # the registry entry's own name, passed along by hydra
        super().__init__(*args, **kwargs)
        self.user_settings = {"base_url": user_base_url, "model": user_model, "temperature": user_temperature,
                              "api_key": os.environ.get(user_api_key_var) if user_api_key_var else None}
        self.user_max_turns = user_max_turns
        self._user = None

    def simulated_user(self, interaction_kwargs):
        """The user of the row's task (``interaction_kwargs``: ``task_id``, ``env_id``)."""
        env_id, task_id = interaction_kwargs["env_id"], interaction_kwargs["task_id"]
        b = tools.bundle(env_id)
        endpoint = usersim.UserEndpoint.from_env(**self.user_settings)
        return usersim.SimulatedUser(b.task(task_id)["conversation"], list(b.tools), endpoint, self.user_max_turns)

    async def run(self, sampling_params, priority=0, **kwargs):
        interaction_kwargs = kwargs.get("interaction_kwargs") or (kwargs.get("extra_info") or {}).get(
            "interaction_kwargs") or {}
        self._user = self.simulated_user(interaction_kwargs)
        self._meta = {"task_id": interaction_kwargs.get("task_id"), "env_id": interaction_kwargs.get("env_id")}
        return await super().run(sampling_params, priority=priority, **kwargs)

    async def _handle_generating_state(self, agent_data, sampling_params, ignore_termination=False):
        before = len(agent_data.messages)
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        if state != AgentState.TERMINATED or len(agent_data.messages) == before or agent_data.tool_calls:
            return state  # tool calls, or a limit reached before the reply was read
        return await self.user_turn(agent_data)

    async def user_turn(self, agent_data):
        """The user's answer to the assistant's last message: into the context as a ``user`` turn (GENERATING), or
        the end of the conversation (TERMINATED)."""
        user = self._user
        record = tools.trajectory_record(agent_data, self._meta)
        content = agent_data.messages[-1].get("content") or ""
        if isinstance(content, list):
            content = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
        turn = await asyncio.to_thread(user.respond, tools.clean_reply(content))
        if record is not None:
            record["user"] = user.record()
        if turn.ends:
            return AgentState.TERMINATED
        previous = list(agent_data.messages)
        agent_data.messages.append({"role": "user", "content": turn.text})
        schemas = getattr(agent_data, "_active_tool_schemas", self.tool_schemas)
        merge_result, response_mask, response_logprobs = await self.ct_merge_context_msg(
            previous, agent_data.messages, agent_data.prompt_ids, agent_data.response_mask,
            agent_data.response_logprobs if agent_data.response_logprobs else None, tools=schemas,
        )
        if len(response_mask) >= self.response_length:
            return AgentState.TERMINATED
        agent_data.prompt_ids = merge_result.token_ids
        agent_data.response_mask = response_mask
        if agent_data.response_logprobs:
            agent_data.response_logprobs = response_logprobs or []
        agent_data.user_turns += 1
        return AgentState.GENERATING
