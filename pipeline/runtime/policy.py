"""The rules of an environment as guards: what ``--enforce-policy`` does, in server.py and in process.

Tools stay permissive by default (as in tau2-bench: the server does what it is asked and the agent must follow
the policy). Enforcing turns each rule (``pipeline.ir.Rule``: a ``condition`` that returns a row when a call is
forbidden, and the clerk's ``message``) into a ``guard`` step with ``must: not_exist`` put first in every tool it
governs, so the engine runs it like any guard: under the read-only authorizer, inside
the call's savepoint, refusing with the message (kind ``guard``) before anything is written.

Embedded verbatim into ``server.py`` after the server section, and only when the environment has rules (a server
without rules keeps its bytes); standard library only. ``EnvInstance(env, enforce_policy=True)`` uses the same
functions, so both paths refuse the same calls with the same words.
"""

import sys

ENFORCE_FLAG = "--enforce-policy"
ENFORCE_HELP = ("refuse every call the environment's policy (policy.md) forbids, with the rule's message "
                "(default: tools do what they are asked; the agent must follow the policy)")


def rule_guard(rule):
    """The guard step a rule becomes: fails with the rule's message when its condition finds a row."""
    return {"kind": "guard", "sql": rule["condition"], "must": "not_exist", "error": rule["message"], "bind": None}


def guarded_tools(tools, rules):
    """``tools`` (tool dicts) with each rule's guard first in the tools it governs, rules in their order."""
    out = []
    for tool in tools:
        guards = [rule_guard(r) for r in rules or [] if tool.get("name") in (r.get("tools") or [])]
        out.append({**tool, "steps": guards + list(tool.get("steps") or [])} if guards else tool)
    return out


def enforced(env):
    """The environment dict (the IR as JSON) with its rules enforced by its tools."""
    return {**env, "tools": guarded_tools(env.get("tools") or [], env.get("rules") or [])}


def main_with_policy(main, env, schemas, env_id, argv=None, results=None):
    """``main`` of server.py with one more option, ``--enforce-policy``."""
    args = list(sys.argv[1:] if argv is None else argv)
    enforce = ENFORCE_FLAG in args
    rest = [a for a in args if a != ENFORCE_FLAG]
    try:
        return main(enforced(env) if enforce else env, schemas, env_id, argv=rest, results=results)
    except SystemExit as exc:
        if exc.code == 0 and any(a in ("-h", "--help") for a in rest):
            print(f"\npolicy ({len(env.get('rules') or [])} rules, see policy.md):\n  {ENFORCE_FLAG}  {ENFORCE_HELP}")
        raise
