"""The rows stage: ``populate.generate_seed`` fills every table, parents first (the LLM's example rows,
then ``generators`` / ``maker`` for rows at scale).
"""
