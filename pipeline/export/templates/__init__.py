"""Source files copied into exported artefacts (they import trainer libraries, not envfoundry)."""
