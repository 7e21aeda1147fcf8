"""The catalog as every export format reads it: :func:`pipeline.catalog.load_catalog` (environments and the
one task bank, checked; errors name the file, line or key), named here for the format modules."""

from __future__ import annotations

from pipeline.catalog import Catalog as Catalog
from pipeline.catalog import CatalogEnv as CatalogEnv
from pipeline.catalog import CatalogError as CatalogError
from pipeline.catalog import load_catalog as load_catalog
