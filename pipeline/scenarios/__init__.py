"""Before any environment: domain seeds expanded into scenarios (``expand``), near duplicates
dropped (``dedup``).
"""
