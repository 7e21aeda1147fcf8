"""Run inside the OpenEnv trainer venv: an exported environment's reset observations, served from the
environment directory in this process, as OpenEnv's server serializes them (``serialize_observation``, then the
WebSocket response's JSON) against pydantic's own dump of the same observation. Prints one JSON report: per
task whether the bytes are the same, whether two sessions' dumps share the tools' dicts, and whether a client's
copy parsed from the JSON is equal and dumps the same."""

import json
import sys

from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import WSObservationResponse
from pydantic import BaseModel

root = sys.argv[1]
sys.path.insert(0, root)
from models import TaskObservation  # noqa: E402  # the export's own, from its directory
from server import environment  # noqa: E402

EXCLUDE = {"reward", "done"}
report: dict = {"tasks": [], "conversation_tools_same": None}
for task_id in sorted(environment.bundle().tasks):
    a, b = environment.EnvFoundryEnvironment(), environment.EnvFoundryEnvironment()
    obs, other = a.reset(task_id=task_id), b.reset(task_id=task_id)
    wire = serialize_observation(obs)
    plain = BaseModel.model_dump(obs, exclude=EXCLUDE)  # pydantic's, without the shared dumps
    sent = json.loads(WSObservationResponse(data=wire).model_dump_json())["data"]["observation"]
    client = TaskObservation.model_validate({**sent, "reward": wire["reward"], "done": wire["done"]})
    report["tasks"].append({
        "task_id": task_id,
        "tools": len(obs.tools),
        "same_value": wire["observation"] == plain and list(wire["observation"]) == list(plain),
        "same_json": WSObservationResponse(data=wire).model_dump_json()
        == WSObservationResponse(data={**wire, "observation": plain}).model_dump_json(),
        "shared": all(x is y for x, y in zip(wire["observation"]["tools"],
                                             serialize_observation(other)["observation"]["tools"], strict=True)),
        "copy_per_dump": wire["observation"]["tools"] is not serialize_observation(other)["observation"]["tools"],
        "client_equal": client == obs and client.model_dump() == obs.model_dump(),
        "client_not_shared": not any(x is y for x, y in zip(client.model_dump()["tools"], wire["observation"]["tools"],
                                                           strict=True)),
    })
    a.close()
    b.close()
talk = TaskObservation(tools=environment.tool_specs(True))
report["conversation_tools_same"] = (talk.model_dump() == BaseModel.model_dump(talk)
                                     and talk.model_dump()["tools"][-1]["name"] == environment.MESSAGE)
print("REPORT " + json.dumps(report))
