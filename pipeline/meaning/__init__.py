"""Meaning, checked by code against the model's own example rows: language-neutral checks that no stage owns.

A column's example values are its specification (:mod:`pipeline.meaning.profile`: character classes, length and
word counts, and MiniLM similarity to its own examples against other columns' examples); relations the examples
show between columns and against the environment's clock (:mod:`pipeline.meaning.relations`); vocabulary lists
cleaned of placeholders, glued values, repeated words and uniqueness suffixes (:mod:`pipeline.meaning.vocab`); and
the semantic findings a build could not fix (:mod:`pipeline.meaning.findings`); which of a scenario's goals the
write tools serve (:mod:`pipeline.meaning.goals`) and which of its kinds of record a schema keeps
(:mod:`pipeline.meaning.kinds`), both by one one-to-one MiniLM assignment (:mod:`pipeline.meaning.assign`). Nothing
here reads a word list of any language or a column's name: only characters' Unicode classes, digits, separators and vectors.
This package imports no stage (tests/test_layers.py places it beside the runtime).
"""
