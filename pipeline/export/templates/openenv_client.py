"""The typed client of this environment: a persistent WebSocket session per client (its own
database on the server).

    from <package> import EnvFoundryEnv, CallToolAction
    with EnvFoundryEnv(base_url="http://127.0.0.1:8000").sync() as env:
        task = env.reset(task_id="...").observation                 # TaskObservation
        env.step(CallToolAction(tool_name="...", arguments={...}))    # ToolObservation
        result = env.step(CallToolAction(tool_name=task.submit_tool, arguments={"answer": "..."}))
        result.reward, result.done
"""

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsObservation

from .models import EnvFoundryState, TaskObservation, ToolObservation


class EnvFoundryEnv(EnvClient[CallToolAction, ToolObservation, EnvFoundryState]):
    def _step_payload(self, action: Any) -> dict[str, Any]:
        if isinstance(action, dict):
            return action
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult:
        obs = dict(payload.get("observation") or {})
        obs["done"] = payload.get("done", False)
        obs["reward"] = payload.get("reward")
        if "instruction" in obs:
            observation: Any = TaskObservation.model_validate(obs)
        elif "tools" in obs:
            observation = ListToolsObservation.model_validate(obs)
        else:
            observation = ToolObservation.model_validate(obs)
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> EnvFoundryState:
        return EnvFoundryState.model_validate(payload)
