"""What every stage reads about a database and its tools: columns and CHECK lists (``columns``), the
DDL helpers and scratch databases (``ddl``), natural keys (``keys``) and key-column names
(``keynames``), what each tool takes and gives (``analysis``, ``ops``), paged listers (``paging``).
It imports no stage.
"""
