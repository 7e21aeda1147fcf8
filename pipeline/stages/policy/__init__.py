"""The policy stage: ``house_rules.make_policy``; code proposes and checks the candidate rules
(``candidates``), the LLM picks and words them.
"""
