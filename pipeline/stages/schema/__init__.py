"""The schema stage: intents (``intents.generate_intents``), then the tables (``tables.generate_schema``).
"""
