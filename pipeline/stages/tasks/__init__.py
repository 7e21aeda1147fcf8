"""The tasks stage: ``bank.generate_tasks`` (code plans with ``planner``, the LLM words the request;
``code_wording`` when it cannot), ``conversation`` forms, ``templates`` for the sampler, ``finish``.
"""
