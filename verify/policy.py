"""The policy as the agent reads it: one renderer for ``policy.md``, the tester's and eval's system prompt and
every export's.

An environment with rules (``ir.Environment.rules``, ``[stages.build] policy``) gives its agent the policy
text (:func:`policy_markdown`: the scenario, what to do with the rules, the rules numbered with the tools they
govern and, for a rule that offers one, its compliant alternative; the ``md_`` sections of ``prompts/policy.md``). :func:`with_policy` puts it after a system prompt; an
environment without rules keeps its system prompt to the byte (its LLM cache keys stay valid).
"""

from __future__ import annotations

from pipeline.ir import Environment, Rule
from pipeline.prompts import render_section


def policy_markdown(env: Environment) -> str:
    """``policy.md``: the scenario, what the agent is to do with the rules, and the rules, numbered, each with
    the tools it governs (the ``md_`` sections of ``prompts/policy.md``; the messages are the rules' own)."""
    rules = [render_section("policy", "md_rule", n=i, message=" ".join(r.message.split()),
                            tools=", ".join(f"`{t}`" for t in r.tools)) + _instead(r) for i, r in enumerate(env.rules, 1)]
    return "\n\n".join([render_section("policy", "md_title", name=" ".join(env.scenario.name.split())),
                        render_section("policy", "md_intro", description=" ".join(env.scenario.description.split())),
                        "\n".join(rules)]) + "\n"


def _instead(rule: Rule) -> str:
    """The alternative a rule offers, after its line (``md_instead``: the tool and the values the policy fixes);
    nothing for a rule without one, whose line keeps its bytes."""
    alt = rule.alternative
    if alt is None:
        return ""
    values = ", ".join(f"{k} {v!r}" for k, v in alt.fixed.items())
    return " " + render_section("policy", "md_instead", tool=f"`{alt.tool}`", values=values)


def policy_text(env: Environment) -> str | None:
    """The policy an agent of ``env`` is given (``policy.md``'s text), or None when it has no rules."""
    return policy_markdown(env).strip() if env.rules else None


def with_policy(system: str, env: Environment) -> str:
    """``system`` followed by the policy of ``env``; ``system`` itself when ``env`` has no rules."""
    text = policy_text(env)
    return system if text is None else f"{system}\n\n{text}"
