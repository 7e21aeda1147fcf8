"""The tools stage: ``toolset.generate_tools`` plans and writes the tools; ``finder_gaps`` and
``write_gaps`` complete the set by code, ``param_names``, ``amend_schema``, ``exercise`` check it;
``repair`` rewrites a tool (or the data) the checker blamed.
"""
